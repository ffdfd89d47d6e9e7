#!/usr/bin/env bash
# Builds the upstream control plane the Kubernetes tests run against: kube-apiserver, kube-controller-manager,
# kube-scheduler and kubelet from k8s.io/kubernetes, and etcd from go.etcd.io/etcd/server/v3, at the releases tools/kube/go.mod pins. Built once per
# machine into the project's cache (SANDGATE_CACHE_DIR, default ~/.cache/sandgate) under kube-<release>-<hash of
# go.mod and go.sum>; a second run with the same pins only checks. The Go module and build caches live beside the
# binaries (go-mod/, go-build/) so a build never depends on, or fills, the user's own Go caches; the build cache is
# removed after a build (it is large and a finished build no longer needs it).
#
#   bash scripts/build-kube.sh          build if needed; prints the binaries' directory on stdout
#   bash scripts/build-kube.sh --dir    print that directory and exit 0 if it holds a finished build, 1 if not
#
# Writes its exit status to DIR.status when it ends (scripts/setup.sh --for-tests runs it in the background,
# DIR.pid, log in DIR.log; scripts/start-kube.sh waits for that status).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODULE="$ROOT/tools/kube"
cache_dir="${SANDGATE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sandgate}"
release="$(awk '$1 == "k8s.io/kubernetes" { print $2 }' "$MODULE/go.mod")"
[[ -n $release ]] || { echo "build-kube.sh: no k8s.io/kubernetes requirement in $MODULE/go.mod" >&2; exit 1; }
pins="$(cat "$MODULE/go.mod" "$MODULE/go.sum" | sha256sum | cut -c1-12)"
dir="$cache_dir/kube-$release-$pins"
bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet)

built() { [[ $(cat "$dir.status" 2>/dev/null) == 0 ]] && for b in "${bins[@]}"; do [[ -x $dir/$b ]] || return 1; done; }

if [[ ${1:-} == --dir ]]; then
  echo "$dir"
  built
  exit
fi
if built; then
  echo "$dir"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "build-kube.sh: 'go' is not on PATH. The Kubernetes tests build kube-apiserver, kubelet and etcd from source" \
    "and need Go >= 1.24 (https://go.dev/dl; Debian bookworm's golang-go 1.19 is too old)." >&2
  mkdir -p "$cache_dir" && echo 1 > "$dir.status"
  exit 1
fi

rm -f "$dir.status"
mkdir -p "$dir"
export GOMODCACHE="$cache_dir/go-mod" GOCACHE="$dir.go-build" GOFLAGS=-mod=readonly GOTOOLCHAIN=local
# Stamped as upstream's release build does (hack/lib/version.sh), so /version and the node's kubeletVersion say the
# release rather than v0.0.0-master.
minor="${release#v1.}"
minor="${minor%%.*}"
stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stamp+=" -X $pkg.gitVersion=$release -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  stamp+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

status=0
t0=$SECONDS
echo "build-kube.sh: building ${bins[*]} $release into $dir (Go $(go env GOVERSION)), once per machine:" \
  "~560 MB of modules, then ~19 min of CPU: ~10 min on 2 idle cores, longer when other work shares them" >&2
(
  cd "$MODULE"
  go mod download || { echo "build-kube.sh: go mod download failed: the build needs the Go module proxy" \
    "(GOPROXY=$(go env GOPROXY))" >&2; exit 1; }
  t1=$SECONDS
  echo "build-kube.sh: modules downloaded in $((t1 - t0)) s" >&2
  # The two cores are shared: build at a lower priority than the tests beside it.
  nice -n 10 go build -trimpath -ldflags "-s -w$stamp" -o "$dir/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet
  echo "build-kube.sh: Kubernetes built in $((SECONDS - t1)) s; now etcd" >&2
  nice -n 10 go build -trimpath -ldflags "-s -w" -o "$dir/etcd" go.etcd.io/etcd/server/v3
) || status=$?
rm -rf "$GOCACHE"
if ((status == 0)); then
  echo "build-kube.sh: built in $((SECONDS - t0)) s: $(du -sh "$dir" | cut -f1) of binaries," \
    "$(du -sh "$GOMODCACHE" | cut -f1) of modules in $GOMODCACHE" >&2
  echo "$dir"
else
  echo "build-kube.sh: the build failed (status $status)" >&2
fi
echo "$status" > "$dir.status"
exit "$status"
