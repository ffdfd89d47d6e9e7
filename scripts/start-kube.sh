#!/usr/bin/env bash
# Starts a one-node Kubernetes on this machine for the Kubernetes tests, from the upstream binaries
# scripts/build-kube.sh builds (it waits for, or runs, that build):
#   - etcd and kube-apiserver on loopback, with a CA, a service-account issuer and keys made here, token
#     authentication for the control plane's own users, Node,RBAC authorization and the default admission plugins
#     (Pod Security among them) plus NodeRestriction;
#   - kube-controller-manager (garbage collector, namespaces, service accounts, quotas, Pod GC, node lifecycle) and
#     kube-scheduler;
#   - a node: Debian's containerd on a socket of its own (its CRI, runc, the CNI bridge, host-local and loopback
#     plugins of containernetworking-plugins, a pause image built here from tools/kube/pause), the runtime image
#     imported into it, and the kubelet;
#   - the namespace `sandgate` labelled pod-security.kubernetes.io/enforce=restricted, with the chart's worker
#     ServiceAccount and RBAC as the real `helm template` renders them, and a kubeconfig for that ServiceAccount with a
#     real token (TokenRequest), so that every call the backend makes is authorized by the chart's Role.
# A second run finds it running and only checks; after a reboot it starts again from its state in a few seconds.
# Prints what a shell or a test needs, as lines `eval` takes:
#   eval "$(bash scripts/start-kube.sh)"; kubectl get nodes     (kubectl: npm run kubectl, or scripts/kube-tools.sh)
#
#   bash scripts/start-kube.sh            start (or check) it
#   bash scripts/start-kube.sh --stop     stop every process it started (its state stays for the next start)
#   bash scripts/start-kube.sh --reset    stop, then delete its state
#
# Environment: SANDGATE_KUBE_DIR (state; default /var/lib/sandgate-kube), SANDGATE_KUBE_PORT (the API server's port,
# 16443), SANDGATE_KUBE_NODE=none (no containerd and kubelet), SANDGATE_KUBE_BIN (binaries built elsewhere), SANDGATE_IMAGE (the runtime image imported into the
# node; default sandgate/runtime:1), SANDGATE_CACHE_DIR (where build-kube.sh keeps the binaries).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${SANDGATE_KUBE_DIR:-/var/lib/sandgate-kube}"
RUN="$DIR/run"
PKI="$DIR/pki"
LOGS="$DIR/logs"
API_PORT="${SANDGATE_KUBE_PORT:-16443}"
ETCD_PORT=$((API_PORT + 1))
ETCD_PEER_PORT=$((API_PORT + 2))
NODE_NAME=sandgate-node
POD_SUBNET=10.217.0.0/16
POD_GATEWAY=10.217.0.1
SERVICE_RANGE=10.218.0.0/16
BRIDGE=sgkube0
PAUSE_IMAGE=sandgate.local/pause:1
RUNTIME_IMAGE="${SANDGATE_IMAGE:-sandgate/runtime:1}"
NAMESPACE=sandgate
RELEASE=sg
T0=$SECONDS
COLD_BUILD="a cold build takes ~19 min of CPU: ~10 min on 2 idle cores, longer when other work shares them"

say() { printf '==> [%ss] start-kube: %s\n' "$((SECONDS - T0))" "$*" >&2; }
die() { printf 'error: start-kube: %s\n' "$*" >&2; exit 1; }
have() { command -v "$1" >/dev/null 2>&1; }
alive() { [[ -s $RUN/$1.pid ]] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }

stop_one() {   # stop_one NAME: SIGTERM, then SIGKILL after 10 s
  alive "$1" || { rm -f "$RUN/$1.pid"; return 0; }
  local pid
  pid="$(cat "$RUN/$1.pid")"
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$RUN/$1.pid"
}

stop_all() {
  # The node's Pods first (their containers would outlive the kubelet), while the API server still answers.
  if alive kubelet && alive kube-apiserver; then
    KUBECONFIG="$DIR/admin.kubeconfig" timeout 30 "$KUBECTL" delete pods --all --all-namespaces --grace-period=0 \
      --force --wait=false >/dev/null 2>&1 || true
  fi
  stop_one kubelet
  if alive containerd; then
    # Any task left (the kubelet was killed before it stopped them) goes with its containerd.
    for task in $(ctr -a "$RUN/containerd.sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr -a "$RUN/containerd.sock" -n k8s.io tasks kill -s SIGKILL "$task" >/dev/null 2>&1 || true
    done
  fi
  stop_one containerd
  stop_one kube-scheduler
  stop_one kube-controller-manager
  stop_one kube-apiserver
  stop_one etcd
}

# One start (or stop) at a time: test processes that find no cluster each call this script.
mkdir -p "$(dirname "$DIR")"
exec 9>"$DIR.lock"
flock 9
KUBECTL="$(bash "$ROOT/scripts/kube-tools.sh")/kubectl/kubectl"
HELM="$(dirname "$(dirname "$KUBECTL")")/helm/helm"
case ${1:-} in
  --stop) stop_all; say "stopped (state kept in $DIR)"; exit 0 ;;
  --reset)
    stop_all
    # Pod volumes the kubelet mounted (emptyDir on tmpfs, Secrets) before its state goes.
    grep -o " $DIR/[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
    rm -rf "$DIR"
    ip link delete "$BRIDGE" 2>/dev/null || true
    iptables -w 5 -D INPUT -i "$BRIDGE" -j SGKUBE-HOST 2>/dev/null || true
    iptables -w 5 -D FORWARD -i "$BRIDGE" -j DROP 2>/dev/null || true
    iptables -w 5 -F SGKUBE-HOST 2>/dev/null && iptables -w 5 -X SGKUBE-HOST 2>/dev/null || true
    say "stopped and deleted $DIR"
    exit 0 ;;
  "") ;;
  *) die "unknown argument $1 (known: --stop, --reset)" ;;
esac
[[ $(id -u) == 0 ]] || die "must run as root (the kubelet and containerd manage cgroups, mounts and network namespaces)"

# --- the binaries -------------------------------------------------------------------------------------------
# SANDGATE_KUBE_BIN: a directory holding the binaries already (etcd, kube-apiserver, …), used as it is.
if [[ -n ${SANDGATE_KUBE_BIN:-} ]]; then
  BIN=$SANDGATE_KUBE_BIN
else
BIN="$(bash "$ROOT/scripts/build-kube.sh" --dir)" || {
  if [[ -f $BIN.pid ]] && kill -0 "$(cat "$BIN.pid")" 2>/dev/null; then
    # Started by scripts/setup.sh --for-tests. Say every minute how far it is, so a long wait is not taken for a hang.
    say "waiting for the Kubernetes build under way (log: $BIN.log; $COLD_BUILD)"
    waited=0
    while kill -0 "$(cat "$BIN.pid")" 2>/dev/null; do
      sleep 5
      waited=$((waited + 5))
      ((waited % 60)) || say "still building, ${waited} s waited here: $(tail -n 1 "$BIN.log" 2>/dev/null | cut -c1-120)"
    done
  fi
  bash "$ROOT/scripts/build-kube.sh" --dir >/dev/null || {
    if [[ -f $BIN.status && $(cat "$BIN.status") != 0 && -f $BIN.log ]]; then
      say "the background build failed (status $(cat "$BIN.status")); the end of $BIN.log:"
      tail -n 20 "$BIN.log" >&2
    fi
    say "building the Kubernetes binaries now (once per machine; $COLD_BUILD)"
    bash "$ROOT/scripts/build-kube.sh" >/dev/null || die "scripts/build-kube.sh failed (its output is above)"
  }
}
fi
mkdir -p "$RUN" "$PKI" "$LOGS"
chmod 0700 "$DIR"

# --- keys, certificates and tokens (once) ---------------------------------------------------------------------
node_ip() {   # the address of the default route's interface: the apiserver reaches the kubelet there
  ip -4 route get 1.1.1.1 2>/dev/null | awk '{ for (i = 1; i < NF; i++) if ($i == "src") { print $(i + 1); exit } }'
}
NODE_IP="$(node_ip)"
[[ -n $NODE_IP ]] || die "no IPv4 address on a default route for the node"
sign() {   # sign NAME SUBJECT EXTENSIONS: a key and a certificate signed by the cluster's CA
  [[ -s $PKI/$1.crt && $(cat "$PKI/$1.ext" 2>/dev/null) == "$3" ]] && return 0
  openssl genrsa -out "$PKI/$1.key" 2048 2>/dev/null
  openssl req -new -key "$PKI/$1.key" -subj "$2" -out "$PKI/$1.csr" 2>/dev/null
  printf '%s\n' "$3" > "$PKI/$1.ext"
  openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 3650 \
    -extfile "$PKI/$1.ext" -out "$PKI/$1.crt" 2>/dev/null
}
if [[ ! -s $PKI/ca.crt ]]; then
  say "making the cluster's CA, service-account keys and tokens in $PKI"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -days 3650 \
    -subj "/CN=sandgate-kube-ca" 2>/dev/null
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
fi
SERVICE_IP=10.218.0.1
sign apiserver "/CN=kube-apiserver" "subjectAltName=IP:127.0.0.1,IP:$SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc
extendedKeyUsage=serverAuth"
sign apiserver-kubelet-client "/O=kubeadm:cluster-admins/CN=kube-apiserver-kubelet-client" "extendedKeyUsage=clientAuth"
sign kubelet "/CN=$NODE_NAME" "subjectAltName=IP:$NODE_IP,DNS:$NODE_NAME
extendedKeyUsage=serverAuth"
if [[ ! -s $PKI/tokens.csv ]]; then
  tok() { openssl rand -hex 24; }
  {
    echo "$(tok),admin,admin,system:masters"
    echo "$(tok),system:kube-controller-manager,system:kube-controller-manager"
    echo "$(tok),system:kube-scheduler,system:kube-scheduler"
    echo "$(tok),system:node:$NODE_NAME,system:node:$NODE_NAME,system:nodes"
  } > "$PKI/tokens.csv"
  chmod 0600 "$PKI/tokens.csv"
fi
token_of() { awk -F, -v u="$1" '$2 == u { print $1 }' "$PKI/tokens.csv"; }
kubeconfig() {   # kubeconfig FILE USER TOKEN [NAMESPACE]
  local ns=${4:-default}
  cat > "$1.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: sandgate-kube
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $(base64 -w0 < "$PKI/ca.crt")
users:
- name: $2
  user:
    token: $3
contexts:
- name: $2@sandgate-kube
  context: { cluster: sandgate-kube, user: $2, namespace: $ns }
current-context: $2@sandgate-kube
EOF
  chmod 0600 "$1.tmp"
  mv "$1.tmp" "$1"
}
kubeconfig "$DIR/admin.kubeconfig" admin "$(token_of admin)"
kubeconfig "$DIR/controller-manager.kubeconfig" system:kube-controller-manager "$(token_of system:kube-controller-manager)"
kubeconfig "$DIR/scheduler.kubeconfig" system:kube-scheduler "$(token_of system:kube-scheduler)"
kubeconfig "$DIR/kubelet.kubeconfig" "system:node:$NODE_NAME" "$(token_of "system:node:$NODE_NAME")"
export KUBECONFIG="$DIR/admin.kubeconfig"

launch() {   # launch NAME COMMAND...: in the background, in a session of its own, logging to LOGS/NAME.log
  local name=$1; shift
  alive "$name" && return 0
  printf '\n==== %s %s\n' "$(date -u +%FT%TZ)" "$*" >> "$LOGS/$name.log"
  setsid "$@" </dev/null >>"$LOGS/$name.log" 2>&1 9>&- &
  echo $! > "$RUN/$name.pid"
}
wait_for() {   # wait_for NAME SECONDS COMMAND...: until COMMAND succeeds, or fail with the process's log
  local name=$1 secs=$2; shift 2
  for _ in $(seq $((secs * 5))); do
    "$@" >/dev/null 2>&1 && return 0
    alive "$name" || break
    sleep 0.2
  done
  tail -n 30 "$LOGS/$name.log" >&2
  die "$name did not come up (log: $LOGS/$name.log)"
}

# --- etcd and the control plane ---------------------------------------------------------------------------------
launch etcd "$BIN/etcd" --name sandgate --data-dir "$DIR/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "sandgate=http://127.0.0.1:$ETCD_PEER_PORT" --listen-metrics-urls "" \
  --quota-backend-bytes $((2 << 30)) --log-level warn
wait_for etcd 30 curl -fsS "http://127.0.0.1:$ETCD_PORT/health"

launch kube-apiserver "$BIN/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --bind-address 127.0.0.1 --secure-port "$API_PORT" --advertise-address 127.0.0.1 --endpoint-reconciler-type none \
  --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" --client-ca-file "$PKI/ca.crt" \
  --token-auth-file "$PKI/tokens.csv" --anonymous-auth=false \
  --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction,PodNodeSelector \
  --service-account-issuer https://kubernetes.default.svc --api-audiences https://kubernetes.default.svc \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --service-cluster-ip-range "$SERVICE_RANGE" \
  --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
  --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority "$PKI/ca.crt" --kubelet-preferred-address-types InternalIP \
  --audit-log-path "$LOGS/audit.log" --audit-policy-file "$ROOT/tools/kube/audit-policy.yaml" \
  --audit-log-maxsize 200 --audit-log-maxbackup 2 --audit-log-mode blocking \
  --profiling=false --v 1
wait_for kube-apiserver 60 "$KUBECTL" get --raw /readyz

launch kube-controller-manager "$BIN/kube-controller-manager" \
  --kubeconfig "$DIR/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$DIR/controller-manager.kubeconfig" \
  --authorization-kubeconfig "$DIR/controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port 0 --leader-elect=false \
  --use-service-account-credentials --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
  --controllers 'garbage-collector-controller,namespace-controller,persistentvolumeclaim-protection-controller,serviceaccount-controller,serviceaccount-token-controller,resourcequota-controller,pod-garbage-collector-controller,node-lifecycle-controller,taint-eviction-controller,root-ca-certificate-publisher-controller' \
  --v 1
launch kube-scheduler "$BIN/kube-scheduler" \
  --kubeconfig "$DIR/scheduler.kubeconfig" \
  --authentication-kubeconfig "$DIR/scheduler.kubeconfig" --authorization-kubeconfig "$DIR/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port 0 --leader-elect=false --v 1

# --- the node -------------------------------------------------------------------------------------------------
if [[ ${SANDGATE_KUBE_NODE:-kubelet} != none ]]; then
  bash "$ROOT/scripts/kube-node.sh" "$DIR" "$BIN" "$NODE_NAME" "$NODE_IP" "$PAUSE_IMAGE" "$RUNTIME_IMAGE" \
    "$POD_SUBNET" "$POD_GATEWAY" "$BRIDGE" || die "the node did not start (scripts/kube-node.sh)"
fi

# --- the sandbox namespace, the chart's worker RBAC, a worker kubeconfig ---------------------------------------------
wait_for kube-apiserver 30 "$KUBECTL" get serviceaccount default -n default
"$KUBECTL" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: $NAMESPACE
  labels: { pod-security.kubernetes.io/enforce: restricted, pod-security.kubernetes.io/enforce-version: latest }
EOF
"$HELM" template "$RELEASE" "$ROOT/helm/sandgate" --namespace "$NAMESPACE" --set redis.url=redis://unused:6379 \
  --show-only templates/serviceaccounts.yaml --show-only templates/rbac.yaml | "$KUBECTL" apply -f - >/dev/null
# The API server reaches the kubelet (logs, exec for an admin) with its client certificate, authorized there by a
# SubjectAccessReview: the user of that certificate gets the kubelet API role, as kubeadm binds it.
"$KUBECTL" apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: { name: "sandgate-kube:apiserver-kubelet-client" }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:kubelet-api-admin" }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: User, name: kube-apiserver-kubelet-client }]
EOF
WORKER_SA="$RELEASE-sandgate-worker"
"$KUBECTL" create token "$WORKER_SA" -n "$NAMESPACE" --duration 48h > "$DIR/worker.token.tmp"
kubeconfig "$DIR/worker.kubeconfig" "system:serviceaccount:$NAMESPACE:$WORKER_SA" "$(cat "$DIR/worker.token.tmp")" \
  "$NAMESPACE"
rm -f "$DIR/worker.token.tmp"
if [[ ${SANDGATE_KUBE_NODE:-kubelet} != none ]]; then
  wait_for kubelet 60 "$KUBECTL" wait --for=condition=Ready "node/$NODE_NAME" --timeout=1s
fi
say "ready: API server https://127.0.0.1:$API_PORT, $("$KUBECTL" get nodes --no-headers 2>/dev/null | wc -l) node(s)"

# Also in DIR/env, where a test process finds a running cluster without running this script.
tee "$DIR/env" <<EOF
export KUBECONFIG=$DIR/admin.kubeconfig
export SANDGATE_KUBE_DIR=$DIR
export SANDGATE_KUBE_AUDIT_LOG=$LOGS/audit.log
export SANDGATE_KUBE_POD_GATEWAY=$POD_GATEWAY
export SANDGATE_K8S_KUBECONFIG=$DIR/worker.kubeconfig
export SANDGATE_K8S_NAMESPACE=$NAMESPACE
EOF
