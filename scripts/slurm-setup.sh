#!/usr/bin/env bash
# Installs what internal/slurmtest starts in tests: Debian's Slurm 22.05
# (slurmctld, slurmd and the client commands) and munge. Idempotent and
# quiet: with everything present it returns at once. Needs root (apt).
#
# The tests do not use the packages' services: each test runs its own
# munged, slurmctld and slurmd from a temporary folder, on free loopback
# ports, and stops them when it ends.
set -euo pipefail

need=()
for cmd in slurmctld slurmd scontrol sbatch squeue scancel munged; do
  command -v "$cmd" >/dev/null 2>&1 || [[ -x /usr/sbin/$cmd ]] || need+=("$cmd")
done
[[ ${#need[@]} -eq 0 ]] && exit 0

echo "installing Slurm and munge for the Slurm tests (missing: ${need[*]})"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends slurm-wlm slurmctld slurmd slurm-client munge >/dev/null
