#!/usr/bin/env bash
# Processes that the tests left running.
#
#   scripts/leftovers.sh snapshot FILE   records the processes alive now
#   scripts/leftovers.sh check FILE      fails, listing them, if processes
#                                        started since the snapshot and left
#                                        behind (orphans, and their children)
#                                        are still alive 10 s later
#
# .ci/run takes the snapshot before the tests and checks after them: a test
# that starts a process (a server, a job's shim, a cluster's daemon) must end
# it, even when it fails.
set -euo pipefail
cmd=${1:-}; file=${2:-}
[[ -n $cmd && -n $file ]] || { echo "usage: $0 snapshot|check FILE" >&2; exit 2; }

# alive writes "pid ppid args" of every process but kernel threads and
# zombies to the file $1.
alive() { ps -e -o pid=,ppid=,stat=,args= | awk '$1 != 2 && $2 != 2 && $3 !~ /^Z/ {$3 = ""; print}' >"$1"; }

case $cmd in
snapshot)
  now=$(mktemp)
  alive "$now"
  awk '{print $1}' "$now" >"$file"
  rm -f "$now"
  ;;
check)
  now=$(mktemp)
  trap 'rm -f "$now"' EXIT
  for attempt in $(seq 10); do
    alive "$now"
    # New since the snapshot, and left behind: no process alive at the
    # snapshot (this script's callers, a shell of someone else's) is its
    # ancestor. A test's leftover is an orphan, or an orphan's child.
    left=$(awk -v snap="$file" -v self=$$ '
      BEGIN { while ((getline p < snap) > 0) old[p] = 1 }
      { parent[$1] = $2; line[$1] = $0 }
      END {
        for (pid in line) {
          if (pid in old || pid == self) continue
          owned = 0
          for (p = parent[pid]; p > 1 && (p in parent); p = parent[p]) if ((p in old) || p == self) { owned = 1; break }
          if (!owned) print line[pid]
        }
      }' "$now")
    [[ -z $left ]] && exit 0
    sleep 1
  done
  echo "processes started by the tests are still running:" >&2
  echo "$left" >&2
  exit 1
  ;;
*)
  echo "usage: $0 snapshot|check FILE" >&2; exit 2
  ;;
esac
