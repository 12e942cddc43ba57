#!/usr/bin/env bash
# Runs one section of docs/benchmarks.md: its benchmarks, with anchored
# patterns, writing the raw output with the commit it measured to
# docs/bench/SECTION.txt, then prints the benchstat table.
#
#   scripts/bench.sh list               the sections and what each runs
#   scripts/bench.sh SECTION            run it (-count 6 unless COUNT is set)
#   scripts/bench.sh SECTION OLD.txt    also compare with an earlier run
#
# COUNT=N overrides the count of runs (6): fewer for a quick look.
set -euo pipefail
cd "$(dirname "$0")/.."

# section;package;pattern (anchored);flags (patterns hold "|")
sections=(
  "search;./internal/core;^BenchmarkSearch\$;-benchtime 3000x"
  "placement;./internal/core;^BenchmarkPlace\$;-benchtime 300x"
  "confirm;./internal/core;^BenchmarkConfirm\$;"
  "index;./internal/core;^BenchmarkNewIndex\$;-benchtime 3x"
  "purchase-sqlite;./internal/service;^BenchmarkPurchase\$;-benchtime 3000x"
  "tracing;./internal/service;^BenchmarkPurchaseTracing\$;-benchtime 3000x"
  "commit-sqlite;./internal/store/sqlite;^BenchmarkCommit(Purchase|AmongBooked)\$;-benchtime 2000x"
  "commit-postgres;./internal/store/postgres;^BenchmarkCommit(Purchase|AmongBooked)\$;-benchtime 2000x"
  "restart;./internal/service;^Benchmark(Reconcile|Restart)\$;-benchtime 3x"
  "replicas;./internal/e2e;^BenchmarkReplicaPurchases\$;-benchtime 3000x"
  "search-under-purchases;./internal/e2e;^BenchmarkSearchUnderPurchases\$;-benchtime 1x"
  "api;./internal/e2e;^BenchmarkPurchasesThroughAPI\$;-benchtime 1x"
  "api-demo;./internal/e2e;^BenchmarkPurchasesThroughAPI\$/^demo\$;-benchtime 1x"
  "bigpool;./internal/core;^BenchmarkPlace(BigPool|Repack)\$;-benchtime 100x"
  "bigfleet;./internal/service;^BenchmarkPurchaseBigFleet\$;-benchtime 1x"
  "calendars;./internal/service;^BenchmarkCalendarsBigFleet\$;-benchtime 10x"
  "outbox;./internal/service;^BenchmarkOutboxSlowSubject\$;-benchtime 1x"
  "kubernetes;./internal/backend/kubernetes;^Benchmark(Block64|Inventory1000|Cluster1000)\$;-benchtime 1x"
  "slurm;./internal/backend/slurm;^BenchmarkSlurmSideBySide\$;-benchtime 1x"
  "console;./internal/e2e/console;^BenchmarkCalendarDraw\$;-benchtime 5x"
)

usage() {
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

[[ $# -ge 1 ]] || usage
if [[ "$1" == list ]]; then
  for s in "${sections[@]}"; do
    IFS=';' read -r name pkg pat flags <<<"$s"
    printf "%-24s go test %s -run '^\$' -bench '%s' %s\n" "$name" "$pkg" "$pat" "$flags"
  done
  exit 0
fi

section="$1" old="${2:-}"
line=""
for s in "${sections[@]}"; do
  [[ "${s%%;*}" == "$section" ]] && line="$s"
done
if [[ -z "$line" ]]; then
  echo "bench: no section $section; scripts/bench.sh list shows them" >&2
  exit 2
fi
if [[ -n "$old" && ! -f "$old" ]]; then
  echo "bench: $old: no such file to compare with" >&2
  exit 2
fi
IFS=';' read -r name pkg pat flags <<<"$line"
count="${COUNT:-6}"
mkdir -p docs/bench
out="docs/bench/$name.txt"
commit="$(git rev-parse --short HEAD)"
dirty=""
git diff --quiet HEAD -- . ':!docs' || dirty=" (with changes not committed)"
echo "bench: $name at $commit$dirty: go test $pkg -run '^\$' -bench '$pat' $flags -count $count -timeout 60m"
{
  echo "commit: $commit$dirty"
  echo "command: go test $pkg -run '^\$' -bench '$pat' $flags -count $count -timeout 60m"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ //')"
  # shellcheck disable=SC2086 # flags are words
  go test "$pkg" -run '^$' -bench "$pat" $flags -count "$count" -timeout 60m
} | tee "$out.tmp"
mv "$out.tmp" "$out"
echo "bench: raw output in $out"
benchstat=(go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da)
if [[ -n "$old" ]]; then
  "${benchstat[@]}" "$old" "$out"
else
  "${benchstat[@]}" "$out"
fi
