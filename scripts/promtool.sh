#!/usr/bin/env bash
# Prints the path of a promtool for deploy/'s tests, which check and unit
# test the alerting rules of deploy/prometheus: `promtool` built from the
# Go module proxy (no release download is reachable in CI) and cached in
#   ${CAPBLOCK_CACHE:-$HOME/.cache/capblock}/promtool/<version>/promtool
# Only a missing binary is built: a second run returns at once. Cold it
# took about 15 minutes on two busy cores at nice 19 (Prometheus
# has many dependencies); on a shared machine run it with `nice -n 19`.
# Progress goes to stderr, the path to stdout.
set -euo pipefail

# The version: Prometheus 3's Go module tags (v0.<minor>.<patch>); deploy's
# test looks for the same cache path.
PROMTOOL_VERSION=v0.316.0

root="${CAPBLOCK_CACHE:-$HOME/.cache/capblock}/promtool/${PROMTOOL_VERSION}"
mkdir -p "$root"
if [[ -x "$root/promtool" ]]; then
  echo "$root/promtool"
  exit 0
fi

# Take turns with other runs; the lock holder owns the scratch space, and
# what a killed run left there goes.
exec 9>"$root/.lock"
flock 9
if [[ ! -x "$root/promtool" ]]; then
  rm -rf "$root"/.build-*
  work="$(mktemp -d "$root/.build-XXXXXX")" # beside the binary: mv is a rename
  trap 'rm -rf "$work"' EXIT
  echo "building promtool $PROMTOOL_VERSION from the Go module proxy (about 15 minutes cold on two cores)" >&2
  # go install builds outside any module, so this repository's go.mod
  # changes nothing; GOBIN is the scratch space, renamed into place.
  (cd "$work" && GOBIN="$work" go install -trimpath -ldflags='-s -w' \
    "github.com/prometheus/prometheus/cmd/promtool@$PROMTOOL_VERSION")
  mv "$work/promtool" "$root/promtool"
fi
echo "$root/promtool"
