#!/usr/bin/env bash
# Lints the OpenAPI document of a running server with the linter, the
# version and the rules that TestOpenAPILints (internal/api) uses.
#
#   scripts/redocly.sh                         http://127.0.0.1:8080
#   scripts/redocly.sh http://HOST:PORT        another server
#   scripts/redocly.sh FILE.json               a document saved to a file
#
# Needs curl and npx (Node.js); npx fetches the pinned @redocly/cli once.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
where="${1:-http://127.0.0.1:8080}"

cli="$(sed -n 's/^const redoclyCLI = "\(.*\)"$/\1/p' "$root/internal/api/openapi_lint_test.go")"
if [[ -z "$cli" ]]; then
  echo "redocly.sh: no redoclyCLI constant in internal/api/openapi_lint_test.go" >&2
  exit 2
fi
command -v npx >/dev/null || { echo "redocly.sh: npx is missing: install Node.js (it brings npx)" >&2; exit 2; }

dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
if [[ -f "$where" ]]; then
  cp "$where" "$dir/openapi.json"
else
  curl -fs "${where%/}/openapi.json" -o "$dir/openapi.json" ||
    { echo "redocly.sh: cannot read ${where%/}/openapi.json: is the server running (capblock serve)?" >&2; exit 2; }
fi
cp "$root/internal/api/testdata/redocly/redocly.yaml" "$dir/"
# The probes answer no 4xx (testdata/redocly/.redocly.lint-ignore.yaml).
cat >"$dir/.redocly.lint-ignore.yaml" <<'IGNORE'
openapi.json:
  operation-4xx-response:
    - '#/paths/~1healthz/get/responses'
    - '#/paths/~1readyz/get/responses'
IGNORE
cd "$dir"
exec npx --yes "$cli" lint --config redocly.yaml openapi.json
