#!/usr/bin/env bash
# Prints the path of a Terraform CLI for internal/tfprovider's tests:
# `terraform` when it is on PATH, else OpenTofu built from the Go module
# proxy (no registry or release download is reachable in CI) and cached in
#   ${CAPBLOCK_CACHE:-$HOME/.cache/capblock}/tofu/<version>/tofu
# Only a missing binary is built: a second run returns at once. OpenTofu
# refuses `go install` (its go.mod has replace directives), so the module
# is copied out of the module cache and built in place. Cold it takes
# about 6 minutes and 1.5 GB of memory on two cores; on a shared machine
# run it with `nice -n 19`. Progress goes to stderr, the path to stdout.
set -euo pipefail

# The version; internal/tfprovider's test looks for the same cache path.
TOFU_VERSION=v1.10.10

if command -v terraform >/dev/null 2>&1; then
  command -v terraform
  exit 0
fi

root="${CAPBLOCK_CACHE:-$HOME/.cache/capblock}/tofu/${TOFU_VERSION}"
mkdir -p "$root"
if [[ -x "$root/tofu" ]]; then
  echo "$root/tofu"
  exit 0
fi

# Take turns with other runs; the lock holder owns the scratch space, and
# what a killed run left there goes.
exec 9>"$root/.lock"
flock 9
if [[ ! -x "$root/tofu" ]]; then
  rm -rf "$root"/.build-*
  work="$(mktemp -d "$root/.build-XXXXXX")" # beside the binary: mv is a rename
  trap 'rm -rf "$work"' EXIT
  echo "building OpenTofu $TOFU_VERSION from the Go module proxy (about 6 minutes cold)" >&2
  src="$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "github.com/opentofu/opentofu@$TOFU_VERSION" |
    sed -n 's/.*"Dir": "\(.*\)",*/\1/p')"
  [[ -n "$src" ]] || { echo "go mod download gave no directory for github.com/opentofu/opentofu@$TOFU_VERSION" >&2; exit 1; }
  cp -r "$src" "$work/src"
  chmod -R u+w "$work/src" # the module cache is read-only
  (cd "$work/src" && go build -trimpath -ldflags='-s -w' -o "$work/tofu" ./cmd/tofu)
  mv "$work/tofu" "$root/tofu"
fi
echo "$root/tofu"
