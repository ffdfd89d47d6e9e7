#!/usr/bin/env bash
# The node of scripts/start-kube.sh's cluster (it calls this; not meant to be run alone): Debian's containerd with its
# CRI on a socket of its own (never the containerd the Docker engine runs), runc, the CNI plugins bridge, host-local
# and loopback, a pause image built here, the runtime image imported from the Docker engine, and the kubelet.
#
#   bash scripts/kube-node.sh DIR BIN NODE_NAME NODE_IP PAUSE_IMAGE RUNTIME_IMAGE POD_SUBNET POD_GATEWAY BRIDGE
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR=$1 BIN=$2 NODE_NAME=$3 NODE_IP=$4 PAUSE_IMAGE=$5 RUNTIME_IMAGE=$6 POD_SUBNET=$7 POD_GATEWAY=$8 BRIDGE=$9
RUN="$DIR/run"
PKI="$DIR/pki"
LOGS="$DIR/logs"
SOCK="$RUN/containerd.sock"
CNI_BIN=/usr/lib/cni
T0=$SECONDS

say() { printf '==> [%ss] kube-node: %s\n' "$((SECONDS - T0))" "$*" >&2; }
die() { printf 'error: kube-node: %s\n' "$*" >&2; exit 1; }
have() { command -v "$1" >/dev/null 2>&1; }
alive() { [[ -s $RUN/$1.pid ]] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }
launch() {
  local name=$1; shift
  alive "$name" && return 0
  printf '\n==== %s %s\n' "$(date -u +%FT%TZ)" "$*" >> "$LOGS/$name.log"
  setsid "$@" </dev/null >>"$LOGS/$name.log" 2>&1 9>&- &
  echo $! > "$RUN/$name.pid"
}
ctr_() { ctr -a "$SOCK" -n k8s.io "$@"; }
# put FILE: stdin into FILE, whole (a reader never sees it half written) and only when it changed (containerd
# reloads the CNI configuration on every write of it).
put() {
  cat > "$1.tmp"
  if cmp -s "$1.tmp" "$1"; then rm -f "$1.tmp"; else mv "$1.tmp" "$1"; changed=1; fi
}
restart_if_changed() {   # restart_if_changed NAME: a running process whose configuration changed starts again
  ((changed)) && alive "$1" || return 0
  kill "$(cat "$RUN/$1.pid")"
  for _ in $(seq 100); do alive "$1" || break; sleep 0.1; done
}

# --- packages -------------------------------------------------------------------------------------------------------
missing=()
have containerd || missing+=(containerd)
have runc || missing+=(runc)
[[ -x $CNI_BIN/bridge && -x $CNI_BIN/host-local && -x $CNI_BIN/loopback ]] || missing+=(containernetworking-plugins)
have iptables || missing+=(iptables)
if ((${#missing[@]})); then
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >&2 \
    || { apt-get update -qq </dev/null && apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >&2; } \
    || die "apt-get install ${missing[*]} failed"
fi

# --- containerd with its CRI, on a socket of its own -----------------------------------------------------------------
mkdir -p "$DIR/containerd" "$DIR/cni/net.d" "$DIR/cni/ipam" "$DIR/kubelet"
changed=0
put "$DIR/containerd/config.toml" <<EOF
# The test node's containerd: root, state and sockets of its own (Docker's containerd is another process).
version = 2
root = "$DIR/containerd/root"
state = "$RUN/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$DIR/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  enable_unprivileged_ports = false
  enable_unprivileged_icmp = false
  # This machine's root lacks CAP_SYS_RESOURCE, so no process may lower an oom_score_adj below its own: the CRI's -998
  # for pause containers would fail every sandbox (runc: "failed to update /proc/self/oom_score_adj: Permission
  # denied"). Restricted, each score is at least containerd's own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN"
    conf_dir = "$DIR/cni/net.d"
    max_conf_num = 1
EOF
# A default route through this host, as every CNI gives Pods, and no masquerade: what stops a Pod's packets is the
# firewall below (as a NetworkPolicy would drop them), not a missing route, so a sandbox sees what it sees on a
# cluster — a connection that times out.
put "$DIR/cni/net.d/10-sandgate.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "sandgate-kube",
  "plugins": [
    {
      "type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "isDefaultGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": { "type": "host-local", "ranges": [[{ "subnet": "$POD_SUBNET", "gateway": "$POD_GATEWAY" }]],
                "dataDir": "$DIR/cni/ipam" }
    }
  ]
}
EOF
restart_if_changed containerd
launch containerd containerd --config "$DIR/containerd/config.toml"
for _ in $(seq 100); do ctr_ version >/dev/null 2>&1 && break; alive containerd || break; sleep 0.2; done
ctr_ version >/dev/null 2>&1 || { tail -n 30 "$LOGS/containerd.log" >&2; die "containerd did not answer on $SOCK"; }

# --- the node's firewall -----------------------------------------------------------------------------------------
# The bridge plugin enforces no NetworkPolicy, and the NetworkPolicy enforcer that needs nothing but the kernel
# (kube-network-policies) needs nftables' queue statement, which this kernel is built without (CONFIG_NFT_QUEUE).
# So the node itself fences its Pods as the chart's policies would: a Pod reaches no other Pod and nothing beyond this
# host, and on this host only the TCP ports listed in chain SGKUBE-HOST (a test stack adds its gateway's port there).
ipt() { iptables -w 5 "$@"; }
ipt -N SGKUBE-HOST 2>/dev/null && {
  ipt -A SGKUBE-HOST -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT
  ipt -A SGKUBE-HOST -j DROP
}
ipt -C INPUT -i "$BRIDGE" -j SGKUBE-HOST 2>/dev/null || ipt -I INPUT 1 -i "$BRIDGE" -j SGKUBE-HOST
ipt -C FORWARD -i "$BRIDGE" -j DROP 2>/dev/null || ipt -I FORWARD 1 -i "$BRIDGE" -j DROP

# --- images: the pause image (built here) and the runtime image (from the Docker engine) -----------------------------
import_image() {   # import_image REF: from the Docker engine, unless containerd holds the same image id already
  local ref=$1 id mark
  id="$(docker image inspect --format '{{.Id}}' "$ref" 2>/dev/null)" || { say "no image $ref in Docker: not imported"; return 0; }
  mark="$DIR/containerd/imported-$(printf '%s' "$ref" | tr -c 'a-zA-Z0-9._-' '_')"
  [[ $(cat "$mark" 2>/dev/null) == "$id" ]] && ctr_ images ls -q | grep -qx "$(normalize "$ref")" && return 0
  say "importing $ref ($id) into the node's containerd"
  docker save "$ref" | ctr_ images import - >/dev/null || die "ctr images import $ref failed"
  printf '%s\n' "$id" > "$mark"
}
normalize() {   # what the kubelet asks containerd for: docker.io/library/x:t, docker.io/org/x:t, host/x:t
  local r=$1
  [[ $r == */* ]] || r="library/$r"
  [[ ${r%%/*} == *.* || ${r%%/*} == *:* || ${r%%/*} == localhost ]] || r="docker.io/$r"
  echo "$r"
}
pause_bin="$BIN/pause"
if [[ ! -x $pause_bin ]]; then
  (cd "$ROOT/tools/kube" && CGO_ENABLED=0 GOFLAGS=-mod=readonly GOTOOLCHAIN=local \
    GOMODCACHE="$(dirname "$BIN")/go-mod" go build -trimpath -ldflags "-s -w" -o "$pause_bin.tmp" ./pause) \
    && mv "$pause_bin.tmp" "$pause_bin" || die "could not build the pause program (tools/kube/pause)"
fi
if ! docker image inspect "$PAUSE_IMAGE" >/dev/null 2>&1; then
  ctx="$(mktemp -d)"
  cp "$pause_bin" "$ctx/pause"
  printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' > "$ctx/Dockerfile"
  docker build -q -t "$PAUSE_IMAGE" "$ctx" >/dev/null || die "docker build of $PAUSE_IMAGE failed"
  rm -rf "$ctx"
fi
import_image "$PAUSE_IMAGE"
import_image "$RUNTIME_IMAGE"

# --- the kubelet -------------------------------------------------------------------------------------------------
changed=0
put "$DIR/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $PKI/kubelet.crt
tlsPrivateKeyFile: $PKI/kubelet.key
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: true }
  x509: { clientCAFile: $PKI/ca.crt }
authorization: { mode: Webhook }
containerRuntimeEndpoint: unix://$SOCK
cgroupDriver: cgroupfs
# This machine runs cgroup v1, which kubelet 1.34 still accepts (1.35 and later refuse it unless this is false).
failCgroupV1: false
failSwapOn: false
registerNode: true
rotateCertificates: false
serializeImagePulls: false
podPidsLimit: 4096
maxPods: 110
containerLogMaxSize: 10Mi
# The disk is shared with other work: evict Pods for a full node only when it is nearly full.
evictionHard: { memory.available: 100Mi, nodefs.available: 1%, nodefs.inodesFree: 1%, imagefs.available: 1% }
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
# How often the kubelet measures each volume's use (default 1 m): an emptyDir over its sizeLimit is evicted within
# this plus the eviction manager's 10 s, not a minute later.
volumeStatsAggPeriod: 2s
EOF
restart_if_changed kubelet
launch kubelet "$BIN/kubelet" --config "$DIR/kubelet/config.yaml" --kubeconfig "$DIR/kubelet.kubeconfig" \
  --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --root-dir "$DIR/kubelet/root" --v 1
for _ in $(seq 100); do curl -fsS http://127.0.0.1:10248/healthz >/dev/null 2>&1 && break; alive kubelet || break; sleep 0.2; done
curl -fsS http://127.0.0.1:10248/healthz >/dev/null 2>&1 || { tail -n 40 "$LOGS/kubelet.log" >&2; die "the kubelet did not come up"; }
say "kubelet up"
