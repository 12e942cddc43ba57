package slurm

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"capblock/internal/backend"
	"capblock/internal/core"
)

// sbatchArgs are the options of run w's batch job: one task per
// instance, as many to a node as the block's instance type fits, each
// with its instance's GPUs, in the block's reservation, until the
// block's end, named after the run (and commented, so that Adopt and a
// repeated Start find it), never requeued by Slurm (a run that fails on
// a node is the service's to run again).
func (wl *Workloads) sbatchArgs(w backend.Workload, account string, now time.Time) []string {
	gpus := max(w.GPUsPerInstance, 1)
	perNode := instancesPerNode(w.Block, gpus)
	nodes := (w.WorldSize + perNode - 1) / perNode
	jobID, n, _ := splitRun(w.Run)
	args := []string{"--parsable", "--job-name=" + w.Run, "--comment=" + jobComment,
		"--reservation=" + w.Block.ID,
		fmt.Sprintf("--nodes=%d", nodes), fmt.Sprintf("--ntasks=%d", w.WorldSize), fmt.Sprintf("--ntasks-per-node=%d", perNode),
		fmt.Sprintf("--gpus-per-task=%d", gpus),
		"--time=" + timeLimit(w.Block.End.Sub(now)),
		"--no-requeue", "--export=ALL", "--open-mode=append",
		"--chdir=" + wl.workDir(w.JobID),
		"--output=" + filepath.Join(wl.logDir(jobID), fmt.Sprintf("run-%d.batch.log", n)),
	}
	if account != "" {
		args = append(args, "--account="+account)
	}
	return args
}

// instancesPerNode is how many instances of gpus GPUs the block holds
// on each of its nodes, at most: a block of part of a node has several
// placements there.
func instancesPerNode(b core.Block, gpus int) int {
	held := map[string]int{}
	most := 0
	for _, p := range b.Placements {
		held[p.Node] += len(p.GPUs)
		most = max(most, held[p.Node])
	}
	return max(most/gpus, 1)
}

// jobComment marks the batch jobs of capblock's runs.
const jobComment = "capblock-run"

// timeLimit is Slurm's d-hh:mm:ss of d, at least a minute: Slurm counts
// time limits in minutes, and rounds up.
func timeLimit(d time.Duration) string {
	s := max(int64(d/time.Second), 60)
	return fmt.Sprintf("%d-%02d:%02d:%02d", s/86400, s%86400/3600, s%3600/60, s%60)
}

// batchScript is run w's batch script. It runs on the first node of the
// job; its srun starts one task per instance, each through taskScript,
// its output appended to the instance's log. MASTER_ADDR is the first
// node's address (NodeAddr, its name unless slurm.conf says otherwise).
func (wl *Workloads) batchScript(w backend.Workload) string {
	jobID, n, _ := splitRun(w.Run)
	logs := wl.logDir(jobID)
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	fmt.Fprintf(&b, "# capblock: run %s of job %s, one task per instance.\n", w.Run, jobID)
	b.WriteString(`first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)` + "\n")
	b.WriteString(`MASTER_ADDR=$(scontrol --oneliner show node "$first" | tr ' ' '\n' | sed -n 's/^NodeAddr=//p')` + "\n")
	b.WriteString(`export MASTER_ADDR="${MASTER_ADDR:-$first}"` + "\n")
	fmt.Fprintf(&b, "exec srun --kill-on-bad-exit=0 --open-mode=append --output=%s /bin/sh -c %s capblock-task",
		shellQuote(filepath.Join(logs, "instance-%t.log")),
		shellQuote(taskScript(filepath.Join(logs, fmt.Sprintf("run-%d.exit-", n)))))
	for _, a := range w.Command {
		b.WriteString(" " + shellQuote(a))
	}
	b.WriteString("\n")
	return b.String()
}

// taskScript runs one instance: the rank and world size from Slurm's
// task, CUDA_VISIBLE_DEVICES as Slurm bound the task's GPUs (none when
// it bound none), then the command. It waits for the command through
// SIGTERM (which Slurm sends to every process of the step) and writes
// its exit status to exitPrefix<rank>: Slurm keeps no task's status
// without accounting.
func taskScript(exitPrefix string) string {
	return `RANK=$SLURM_PROCID; WORLD_SIZE=$SLURM_NTASKS; LOCAL_RANK=$SLURM_LOCALID
export RANK WORLD_SIZE LOCAL_RANK
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-}"
trap : TERM INT
"$@" &
pid=$!
while :; do
	wait "$pid"; code=$?
	if [ "$code" -gt 128 ] && kill -0 "$pid" 2>/dev/null; then continue; fi
	break
done
echo "$code" > ` + shellQuote(exitPrefix) + `"$RANK"
exit "$code"
`
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
