#!/usr/bin/env bash
# Builds a real Kubernetes control plane for the tests (kube-apiserver, etcd, kwok's fake nodes,
# and kubectl for poking at it by hand) from pinned versions through the Go module proxy.
#
# The binaries go to a cache outside the repository, keyed by the versions:
#   ${PELOTON_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pelotonpy/k8s}/<key>/bin
# A second run finds them and only prints that directory.  Everything else (Go's build cache,
# 3-5 GB, and the module download cache) lives in a temporary directory deleted at the end.
# The binaries are built into that temporary directory and moved into place in one rename, so
# an interrupted build never leaves a half-filled cache.  The last line on stdout is the bin
# directory (tests/harness/kube.py reads it).
#
# Why not `go install` everywhere: kube-apiserver's module (k8s.io/kubernetes) uses replace
# directives towards its staging/ tree, which `go install pkg@version` refuses and which the
# module zip does not even contain.  So the module is copied, its staging replaces are swapped
# for the published k8s.io/* v0.34.x modules, and it is built as a main module.  etcd's server
# module has replaces too, so a tiny wrapper module requires it instead.
set -euo pipefail

K8S_VERSION=v1.34.4
# The staging modules (k8s.io/api, apiserver, client-go, ...) publish v0.<minor>.<patch>.
STAGING_VERSION=v0.34.4
ETCD_VERSION=v3.6.17
KWOK_VERSION=v0.8.0
# kwok v0.8.0's go.mod asks for Go 1.26 (Kubernetes v1.34's for 1.24); with GOTOOLCHAIN=local an
# older Go cannot fetch a newer one, so say so up front rather than fail a minute into the build.
GO_MIN_MINOR=26

CACHE_ROOT=${PELOTON_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pelotonpy/k8s}
KEY=k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}
DEST=$CACHE_ROOT/$KEY
BIN_DIR=$DEST/bin
BINARIES=(kube-apiserver etcd kwok kubectl)

all_present() {
  local b
  for b in "${BINARIES[@]}"; do
    [ -x "$BIN_DIR/$b" ] || return 1
  done
}

if all_present; then
  echo "$BIN_DIR"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "ERROR: no Go toolchain to build the Kubernetes test binaries; install Go 1.${GO_MIN_MINOR} or newer" \
    "(https://go.dev/dl/)" >&2
  exit 1
fi
go_minor=$(go env GOVERSION | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
if [ -z "$go_minor" ] || [ "$go_minor" -lt "$GO_MIN_MINOR" ]; then
  if [ "$(go env GOTOOLCHAIN)" = local ]; then
    echo "ERROR: $(go env GOVERSION) is too old for kwok ${KWOK_VERSION} and GOTOOLCHAIN=local forbids" \
      "fetching a newer one; install Go 1.${GO_MIN_MINOR} or newer (https://go.dev/dl/)" >&2
    exit 1
  fi
  echo "note: $(go env GOVERSION) is older than 1.${GO_MIN_MINOR}; Go will fetch a newer toolchain" \
    "through the module proxy (GOTOOLCHAIN=$(go env GOTOOLCHAIN))"
fi

mkdir -p "$CACHE_ROOT"
# Two test sessions may start at once on a fresh machine: one builds, the other waits for it.
exec 9>"$CACHE_ROOT/.$KEY.lock"
if ! flock -n 9; then
  echo "waiting for another build of $KEY to finish"
  flock 9
fi
if all_present; then
  echo "$BIN_DIR"
  exit 0
fi
# A build killed outright (SIGKILL, power cut) leaves its temporary directory; we hold the lock,
# so no other build of this key is using one.
for stale in "$CACHE_ROOT/.build-$KEY".*; do
  [ -e "$stale" ] || continue
  echo "removing an interrupted build's leftovers: $stale"
  chmod -R u+w "$stale" 2>/dev/null || true
  rm -rf "$stale"
done

# Under the cache root, so the final `mv` is a rename on one filesystem (atomic).
WORK=$(mktemp -d "$CACHE_ROOT/.build-$KEY.XXXXXX")
LOG=$WORK/build.log
cleanup() {
  # The module cache is read-only by default; -modcacherw below makes it deletable, and the
  # chmod covers a build interrupted before that mattered.
  chmod -R u+w "$WORK" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
# Make SIGINT/SIGTERM exit through the EXIT trap too, so an interrupted build cleans up.
trap 'exit 130' INT
trap 'exit 143' TERM

export GOPATH=$WORK/gopath
export GOMODCACHE=$WORK/gopath/pkg/mod
export GOCACHE=$WORK/gocache
export GOTMPDIR=$WORK
export CGO_ENABLED=0
# Replace whatever the caller set (the Makefile exports -mod=readonly, which forbids `go mod tidy`).
export GOFLAGS="-modcacherw -buildvcs=false"
OUT=$WORK/bin
mkdir -p "$OUT"

step_start=$SECONDS
# Runs one build command with its output in the log; on failure shows the log's tail and stops.
run() {
  if ! "$@" >>"$LOG" 2>&1; then
    echo "ERROR: failed: $*" >&2
    tail -n 40 "$LOG" >&2
    exit 1
  fi
}
step() {
  echo "[k8s-binaries +$((SECONDS - step_start))s] $*"
}

step "building into $WORK ($(go env GOVERSION), GOPROXY=$(go env GOPROXY))"

step "etcd ${ETCD_VERSION}: wrapper module requiring go.etcd.io/etcd/server/v3"
mkdir -p "$WORK/etcd"
(
  cd "$WORK/etcd"
  run go mod init pelotonpy.local/etcd
  run go get "go.etcd.io/etcd/server/v3@${ETCD_VERSION}"
  run go build -trimpath -ldflags "-s -w" -o "$OUT/etcd" go.etcd.io/etcd/server/v3
)

step "kwok ${KWOK_VERSION}: go install sigs.k8s.io/kwok/cmd/kwok"
run env GOBIN="$OUT" go install -trimpath \
  -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION}" \
  "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"

step "kubernetes ${K8S_VERSION}: go mod download k8s.io/kubernetes"
# Without a main module, `go mod download` fetches into GOMODCACHE and prints where.
k8s_src=$(cd "$WORK" && go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" \
  | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
if [ -z "$k8s_src" ] || [ ! -f "$k8s_src/go.mod" ]; then
  echo "ERROR: go mod download k8s.io/kubernetes@${K8S_VERSION} gave no module directory" >&2
  exit 1
fi

step "kubernetes: swapping staging replaces for published ${STAGING_VERSION} modules"
K8S=$WORK/kubernetes
cp -r "$k8s_src" "$K8S"
chmod -R u+w "$K8S"
# The zip's vendor/ is empty and go.work points at staging/ sources it does not contain.
rm -rf "$K8S/vendor" "$K8S/go.work" "$K8S/go.work.sum"
staging=$(sed -n -E 's#^[[:space:]]*(replace[[:space:]]+)?(k8s\.io/[^[:space:]]+)[[:space:]]+=>[[:space:]]+\./staging/.*#\2#p' \
  "$K8S/go.mod")
if [ -z "$staging" ]; then
  echo "ERROR: no staging replace directives found in k8s.io/kubernetes@${K8S_VERSION}'s go.mod" >&2
  exit 1
fi
edits=()
for mod in $staging; do
  edits+=("-dropreplace=$mod")
  # Only modules the main module requires (at the placeholder v0.0.0) get the published version;
  # the others (sample-controller, ...) are not built and are not on the proxy anyway.
  if grep -q -E "^[[:space:]]*(require[[:space:]]+)?${mod//./\\.}[[:space:]]+v0\.0\.0([[:space:]]|$)" "$K8S/go.mod"; then
    edits+=("-require=$mod@${STAGING_VERSION}")
  fi
done
(cd "$K8S" && run go mod edit "${edits[@]}")

step "kubernetes: go mod tidy"
(cd "$K8S" && run go mod tidy)
# Reproducible only while every import is provided by a pinned requirement: a "finding module
# for package" line means tidy looked up a latest version, which can change from day to day.
if grep -q "finding module for package" "$LOG"; then
  echo "ERROR: go mod tidy resolved a dependency to its latest version (not reproducible):" >&2
  grep "finding module for package" "$LOG" >&2
  exit 1
fi

# What `kubectl version` and /version report (hack/lib/version.sh sets the same variables).
version_flags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  version_flags+=" -X $pkg.gitVersion=${K8S_VERSION}"
  version_flags+=" -X $pkg.gitMajor=$(echo "$K8S_VERSION" | sed -E 's/^v([0-9]+)\..*/\1/')"
  version_flags+=" -X $pkg.gitMinor=$(echo "$K8S_VERSION" | sed -E 's/^v[0-9]+\.([0-9]+)\..*/\1/')"
  version_flags+=" -X $pkg.gitTreeState=clean"
done

step "kubernetes: go build ./cmd/kube-apiserver"
(cd "$K8S" && run go build -trimpath -ldflags "-s -w$version_flags" -o "$OUT/kube-apiserver" ./cmd/kube-apiserver)

step "kubernetes: go build ./cmd/kubectl"
(cd "$K8S" && run go build -trimpath -ldflags "-s -w$version_flags" -o "$OUT/kubectl" ./cmd/kubectl)

for b in "${BINARIES[@]}"; do
  [ -x "$OUT/$b" ] || { echo "ERROR: $b was not built" >&2; exit 1; }
done
"$OUT/kube-apiserver" --version >>"$LOG" 2>&1

step "installing into $BIN_DIR"
mkdir -p "$DEST"
{
  echo "kubernetes ${K8S_VERSION} (staging ${STAGING_VERSION}), etcd ${ETCD_VERSION}, kwok ${KWOK_VERSION}"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) with $(go env GOVERSION) in $((SECONDS - step_start))s"
  (cd "$OUT" && sha256sum "${BINARIES[@]}")
} >"$OUT/BUILD-INFO"
# A leftover partial bin dir (from a tool other than this script) is replaced, not merged.
rm -rf "$BIN_DIR"
mv "$OUT" "$BIN_DIR"
step "done"
echo "$BIN_DIR"
