#!/usr/bin/env bash
# Builds the Kubernetes control plane that internal/kubetest starts in
# tests: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl, KWOK and KWOK's stage files, all from Go modules.
#
# They go to a cache outside the clone, one folder per set of versions:
#   ${CAPBLOCK_CACHE:-$HOME/.cache/capblock}/kube/<versions>/bin
# Only what is missing is built, each component in a temporary folder that
# is moved into place when complete, so a killed build leaves no half cache
# and a second run with everything present returns at once. Runs at the
# same time take turns.
#
# Cold it takes about 8-10 minutes on two cores and 4 GB of build cache.
# On a shared machine run it with `nice -n 19`.
set -euo pipefail

# The versions; internal/kubetest checks that it names the same.
KUBE_VERSION=v1.36.3
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0
CACHE_KEY="${KUBE_VERSION}-etcd${ETCD_VERSION}-kwok${KWOK_VERSION}"

root="${CAPBLOCK_CACHE:-$HOME/.cache/capblock}/kube/${CACHE_KEY}"
bin="$root/bin"
mkdir -p "$bin"

# The KWOK stages that move fake nodes to Ready and pods to Running. KWOK
# renews node Leases itself, so the status heartbeat can be slow.
KWOK_STAGES=(
  node/fast/node-initialize.yaml
  node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
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

# Take turns with other runs; the lock holder then owns the scratch space,
# and what a killed run left there goes.
exec 9>"$root/.lock"
flock 9
rm -rf "$root"/.build-*
work="$(mktemp -d "$root/.build-XXXXXX")" # beside bin: mv is a rename
trap 'rm -rf "$work"' EXIT

# quietly runs a command, showing its output only when it fails.
quietly() {
  "$@" >"$work/log" 2>&1 || { cat "$work/log" >&2; return 1; }
}

# move_into_place moves the named files of a finished build into bin.
move_into_place() {
  local dir="$1" name
  shift
  for name in "$@"; do
    rm -rf "${bin:?}/$name"
    mv "$dir/$name" "$bin/$name"
  done
}

# module_field prints a field of go mod download's JSON for a module.
module_field() {
  (cd "$work" && go mod download -json "$1") | sed -n "s/.*\"$2\": \"\(.*\)\",*/\1/p"
}

build_etcd() {
  missing etcd || return 0
  echo "building etcd $ETCD_VERSION"
  mkdir "$work/etcd" && cd "$work/etcd"
  quietly go mod init capblock.build/etcd
  go mod edit \
    -require="go.etcd.io/etcd/server/v3@$ETCD_VERSION" \
    -require="go.etcd.io/etcd/api/v3@$ETCD_VERSION" \
    -require="go.etcd.io/etcd/client/pkg/v3@$ETCD_VERSION" \
    -require="go.etcd.io/etcd/client/v3@$ETCD_VERSION" \
    -require="go.etcd.io/etcd/pkg/v3@$ETCD_VERSION" \
    -tool=go.etcd.io/etcd/server/v3
  quietly go mod tidy
  go build -trimpath -ldflags='-s -w' -o out/etcd go.etcd.io/etcd/server/v3
  move_into_place out etcd
}

build_kwok() {
  local src stage stages=()
  for stage in "${KWOK_STAGES[@]}"; do
    stages+=("kwok-stages/${stage##*/}")
  done
  missing kwok "${stages[@]}" || return 0
  echo "building kwok $KWOK_VERSION"
  mkdir -p "$work/kwok/out/kwok-stages" && cd "$work/kwok"
  GOBIN="$PWD/out" quietly go install -trimpath -ldflags='-s -w' "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  src="$(module_field "sigs.k8s.io/kwok@$KWOK_VERSION" Dir)"
  for stage in "${KWOK_STAGES[@]}"; do
    cp "$src/kustomize/stage/$stage" out/kwok-stages/
  done
  chmod -R u+w out/kwok-stages # the module cache is read-only
  move_into_place out kwok kwok-stages
}

# build_kube builds the Kubernetes programs in a scratch module that
# requires k8s.io/kubernetes and replaces each staging module its go.mod
# names (./staging/src/k8s.io/X) by the published k8s.io/X v0.<minor>.<patch>.
build_kube() {
  local programs=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
  missing "${programs[@]}" || return 0
  echo "building ${programs[*]} $KUBE_VERSION"
  local edits=() name p gomod
  gomod="$(module_field "k8s.io/kubernetes@$KUBE_VERSION" GoMod)"
  for name in $(sed -n 's|^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/.*|\1|p' "$gomod"); do
    # The proxy does not serve sample-cli-plugin, and nothing built needs it.
    [[ "$name" == k8s.io/sample-cli-plugin ]] && continue
    edits+=("-replace=$name=$name@v0.${KUBE_VERSION#v1.}")
  done
  for p in "${programs[@]}"; do
    edits+=("-tool=k8s.io/kubernetes/cmd/$p")
  done
  # Without the version stamped in, the API server reports v0.0.0.
  local ldflags="-s -w
    -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION
    -X k8s.io/component-base/version.gitMajor=1
    -X k8s.io/component-base/version.gitMinor=$(cut -d. -f2 <<<"$KUBE_VERSION")
    -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
  mkdir "$work/kube" && cd "$work/kube"
  quietly go mod init capblock.build/kube
  go mod edit -require="k8s.io/kubernetes@$KUBE_VERSION" "${edits[@]}"
  quietly go mod tidy
  for p in "${programs[@]}"; do
    go build -trimpath -ldflags="$ldflags" -o "out/$p" "k8s.io/kubernetes/cmd/$p"
  done
  move_into_place out "${programs[@]}"
}

build_etcd
build_kwok
build_kube
echo "Kubernetes test binaries in $bin"
