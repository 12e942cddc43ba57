#!/usr/bin/env bash
# Prints the path of a Jaeger (v2, an OpenTelemetry Collector with
# Jaeger's storage and query API) for the tracing test of internal/e2e,
# which sends a purchase's spans to it over OTLP and reads the trace back:
# built from the Go module proxy (no release download is reachable in
# CI) and cached in
#   ${CAPBLOCK_CACHE:-$HOME/.cache/capblock}/jaeger/<version>/jaeger
# Only a missing binary is built: a second run returns at once. Cold it
# takes about 10 minutes on two busy cores. Progress goes to stderr, the
# path to stdout.
set -euo pipefail

JAEGER_VERSION=v1.75.0

root="${CAPBLOCK_CACHE:-$HOME/.cache/capblock}/jaeger/${JAEGER_VERSION}"
mkdir -p "$root"
if [[ -x "$root/jaeger" ]]; then
  echo "$root/jaeger"
  exit 0
fi

exec 9>"$root/.lock"
flock 9
if [[ ! -x "$root/jaeger" ]]; then
  rm -rf "$root"/.build-*
  work="$(mktemp -d "$root/.build-XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  echo "building jaeger $JAEGER_VERSION from the Go module proxy (about 10 minutes cold on two cores)" >&2
  # Jaeger's go.mod has replace directives, which go install refuses:
  # build it as a tool of a scratch module of its own instead, outside
  # this repository's go.mod.
  (cd "$work" && go mod init jaegerbuild >/dev/null 2>&1 &&
    go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$JAEGER_VERSION" &&
    go build -trimpath -ldflags='-s -w' -o "$work/jaeger" github.com/jaegertracing/jaeger/cmd/jaeger)
  mv "$work/jaeger" "$root/jaeger"
fi
echo "$root/jaeger"
