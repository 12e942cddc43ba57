#!/usr/bin/env bash
# Builds the Kubernetes control plane that internal/kubetest starts in
# tests: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl, KWOK and KWOK's stage files, all from Go modules (no Docker, no
# downloads other than the module proxy).
#
# They go to a cache outside the clone, one folder per set of versions:
#   ${CAPBLOCK_CACHE:-$HOME/.cache/capblock}/kube/<versions>/bin
# Only what is missing is built, each component in a temporary folder that
# is moved into place when complete, so a killed build leaves no half cache
# and a second run with everything present returns at once.
#
# Cold it takes about 8-10 minutes on two cores and 4 GB of build cache.
# Run it with `nice -n 19` on a shared machine.
set -euo pipefail

# The versions; internal/kubetest's cacheKey must name the same folder.
KUBE_VERSION=v1.36.3
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0
CACHE_KEY="${KUBE_VERSION}-etcd${ETCD_VERSION}-kwok${KWOK_VERSION}"

root="${CAPBLOCK_CACHE:-$HOME/.cache/capblock}/kube/${CACHE_KEY}"
bin="$root/bin"
mkdir -p "$bin"

# The KWOK stages that move fake nodes to Ready and pods to Running.
KWOK_STAGES=(
  node/fast/node-initialize.yaml
  node/heartbeat/node-heartbeat.yaml
  pod/fast/pod-ready.yaml
  pod/fast/pod-complete.yaml
  pod/fast/pod-delete.yaml
)

missing() {
  local name
  for name in "$@"; do
    [[ -e "$bin/$name" ]] || return 0
  done
  return 1
}

# scratch makes a temporary folder beside the cache (same file system, so
# the final mv is a rename) and removes it when the script exits.
scratches=()
cleanup() { [[ ${#scratches[@]} -eq 0 ]] || rm -rf "${scratches[@]}"; }
trap cleanup EXIT
scratch() {
  local dir
  dir="$(mktemp -d "$root/.build-XXXXXX")"
  scratches+=("$dir")
  echo "$dir"
}

# quietly runs a command, showing its output only when it fails.
quietly() {
  local log
  log="$(mktemp)"
  "$@" >"$log" 2>&1 || { cat "$log" >&2; rm -f "$log"; return 1; }
  rm -f "$log"
}

# move_into_place moves the finished files of a scratch folder into bin.
move_into_place() {
  local dir="$1" name
  shift
  for name in "$@"; do
    rm -rf "${bin:?}/$name"
    mv "$dir/out/$name" "$bin/$name"
  done
}

build_etcd() {
  missing etcd || return 0
  echo "building etcd $ETCD_VERSION"
  local dir
  dir="$(scratch)"
  (
    cd "$dir"
    quietly go mod init capblock.test/etcd
    go mod edit \
      -require="go.etcd.io/etcd/server/v3@$ETCD_VERSION" \
      -require="go.etcd.io/etcd/api/v3@$ETCD_VERSION" \
      -require="go.etcd.io/etcd/client/pkg/v3@$ETCD_VERSION" \
      -require="go.etcd.io/etcd/client/v3@$ETCD_VERSION" \
      -require="go.etcd.io/etcd/pkg/v3@$ETCD_VERSION" \
      -tool=go.etcd.io/etcd/server/v3
    quietly go mod tidy
    mkdir out
    go build -trimpath -ldflags='-s -w' -o out/etcd go.etcd.io/etcd/server/v3
  )
  move_into_place "$dir" etcd
}

# build_kube builds the four Kubernetes programs in a scratch module that
# requires k8s.io/kubernetes and replaces each staging module it names
# (./staging/src/k8s.io/X) by the published k8s.io/X v0.<minor>.<patch>.
build_kube() {
  local programs=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
  missing "${programs[@]}" || return 0
  echo "building kube-apiserver, kube-controller-manager, kube-scheduler, kubectl $KUBE_VERSION"
  local dir staging="v0.${KUBE_VERSION#v1.}" gomod edits=() name p
  dir="$(scratch)"
  gomod="$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')"
  for name in $(sed -n 's|^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/.*|\1|p' "$gomod"); do
    # The proxy does not serve sample-cli-plugin, and nothing built needs it.
    [[ "$name" == k8s.io/sample-cli-plugin ]] && continue
    edits+=("-replace=$name=$name@$staging")
  done
  for p in "${programs[@]}"; do
    edits+=("-tool=k8s.io/kubernetes/cmd/$p")
  done
  local ldflags="-s -w
    -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION
    -X k8s.io/component-base/version.gitMajor=1
    -X k8s.io/component-base/version.gitMinor=$(cut -d. -f2 <<<"$KUBE_VERSION")
    -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
  (
    cd "$dir"
    quietly go mod init capblock.test/kube
    go mod edit -require="k8s.io/kubernetes@$KUBE_VERSION" "${edits[@]}"
    quietly go mod tidy
    mkdir out
    for p in "${programs[@]}"; do
      go build -trimpath -ldflags="$ldflags" -o "out/$p" "k8s.io/kubernetes/cmd/$p"
    done
  )
  move_into_place "$dir" "${programs[@]}"
}

build_kwok() {
  missing kwok kwok-stages || return 0
  echo "building kwok $KWOK_VERSION"
  local dir src stage
  dir="$(scratch)"
  GOBIN="$dir/out" go install -trimpath -ldflags='-s -w' "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  src="$(cd "$dir" && go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')"
  mkdir "$dir/out/kwok-stages"
  for stage in "${KWOK_STAGES[@]}"; do
    cp "$src/kustomize/stage/$stage" "$dir/out/kwok-stages/"
  done
  chmod -R u+w "$dir/out/kwok-stages"
  move_into_place "$dir" kwok kwok-stages
}

build_etcd
build_kwok
build_kube
echo "kube cluster binaries in $bin"
