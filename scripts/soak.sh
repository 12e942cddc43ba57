#!/usr/bin/env bash
# Runs the deterministic simulation (internal/simulate) on every core:
# one test process per core, each running seeds one after another (a
# seed fixes crypto/rand for its whole process, so seeds do not share
# one), until the time asked for is up or the seeds asked for are run.
#
#   scripts/soak.sh 30m                 seeds from a random first one, for 30 minutes
#   scripts/soak.sh 2h --ops 20000      longer seeds
#   scripts/soak.sh --seeds 200         seeds 1..200, then stop (what CI runs)
#   scripts/soak.sh --seeds 50 --first 1000 --procs 4
#
# It prints the seeds it ran, the steps per second, and for each failing
# seed the one command that replays it; it exits 1 when a seed failed.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

duration="" seeds="" first="" ops=5000 procs="$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seeds) seeds="$2"; shift 2 ;;
    --first) first="$2"; shift 2 ;;
    --ops) ops="$2"; shift 2 ;;
    --procs) procs="$2"; shift 2 ;;
    -h|--help) usage ;;
    -*) echo "soak: unknown flag $1" >&2; usage ;;
    *) duration="$1"; shift ;;
  esac
done
if [[ -z "$duration" && -z "$seeds" ]]; then
  echo "soak: say how long (30m, 2h, 90s) or how many seeds (--seeds N)" >&2
  usage
fi
seconds=0
if [[ -n "$duration" ]]; then
  if [[ ! "$duration" =~ ^([0-9]+)([smh])$ ]]; then
    echo "soak: duration $duration: want a number and s, m or h (30m)" >&2
    exit 2
  fi
  case "${BASH_REMATCH[2]}" in
    s) seconds=${BASH_REMATCH[1]} ;;
    m) seconds=$((BASH_REMATCH[1] * 60)) ;;
    h) seconds=$((BASH_REMATCH[1] * 3600)) ;;
  esac
fi
if [[ -z "$first" ]]; then
  if [[ -n "$duration" ]]; then
    first=$(( (RANDOM << 15 | RANDOM) + 1 )) # new seeds each soak; printed below
  else
    first=1
  fi
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "soak: building the simulation's test binary"
go test -c -o "$work/simulate.test" ./internal/simulate

# The simulation allocates briskly and holds little: collecting garbage
# less often buys about a tenth more steps a second.
export GOGC="${GOGC:-400}"
# A seed runs one step at a time: one process per core, each on one
# thread, spends no time handing goroutines between cores (about a third
# more steps a second on two cores than leaving each process both).
export GOMAXPROCS="${GOMAXPROCS:-1}"
began=$(date +%s)
deadline=$((began + seconds))
if [[ -n "$seeds" ]]; then
  echo "soak: seeds $first..$((first + seeds - 1)), $ops steps each, on $procs processes"
else
  echo "soak: seeds from $first, $ops steps each, for $duration on $procs processes"
fi

# worker w runs seeds first+w, first+w+procs, ... while there is time
# (or seeds) left, one test process per seed; it appends "seed ok" or
# "seed fail" to its log, and keeps a failing seed's output.
worker() {
  local w=$1 k=0 seed
  while :; do
    seed=$((first + w + k * procs))
    k=$((k + 1))
    if [[ -n "$seeds" ]]; then
      (( seed < first + seeds )) || return 0
    else
      (( $(date +%s) < deadline )) || return 0
    fi
    if (cd "$work" && CAPBLOCK_SIM_SEED=$seed CAPBLOCK_SIM_OPS=$ops ./simulate.test \
        -test.run '^TestSimulate$' -test.count=1 -test.timeout=1h >"seed-$seed.out" 2>&1); then
      echo "$seed ok" >>"$work/worker-$w.log"
      rm -f "$work/seed-$seed.out"
    else
      echo "$seed fail" >>"$work/worker-$w.log"
      echo "soak: seed $seed FAILED" >&2
    fi
  done
}

pids=()
for ((w = 0; w < procs; w++)); do
  : >"$work/worker-$w.log"
  worker "$w" &
  pids+=($!)
done
for pid in "${pids[@]}"; do
  wait "$pid"
done
elapsed=$(( $(date +%s) - began ))
(( elapsed > 0 )) || elapsed=1

ran="$(cat "$work"/worker-*.log | sort -n)"
passed=$(grep -c ' ok$' <<<"$ran" || true)
failed=$(grep -c ' fail$' <<<"$ran" || true)
total=$(( (passed + failed) * ops ))
low=$(head -1 <<<"$ran" | cut -d' ' -f1)
high=$(tail -1 <<<"$ran" | cut -d' ' -f1)
echo "soak: ran seeds $low..$high ($((passed + failed)) seeds, $ops steps each): $total steps in ${elapsed}s, $((total / elapsed)) steps/s"
if (( failed > 0 )); then
  echo "soak: $failed seeds failed:"
  for seed in $(grep ' fail$' <<<"$ran" | cut -d' ' -f1); do
    out="$work/seed-$seed.out"
    grep -m1 -A2 'seed [0-9]*, step' "$out" | sed 's/^ *//;s/^/  /' || tail -5 "$out" | sed 's/^/  /'
    echo "  replay: $(grep -m1 -o 'CAPBLOCK_SIM_SEED=.*' "$out" || echo "CAPBLOCK_SIM_SEED=$seed CAPBLOCK_SIM_OPS=$ops go test ./internal/simulate -run 'TestSimulate\$' -count=1 -v")"
  done
  exit 1
fi
echo "soak: every seed passed"
