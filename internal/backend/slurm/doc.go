// Package slurm is the backend that sells the GPU nodes of a Slurm
// cluster: `capblock serve --backend slurm`. A block is a Slurm
// reservation named after it; users submit to it with
// `sbatch --reservation=<block>`, and Slurm runs their work.
//
// It drives Slurm through its commands (scontrol, squeue, scancel), run
// with TZ=UTC, since scontrol reads and prints times in its own
// process's zone; slurmrestd 22.05 cannot create reservations. The
// reservation commands run in a few long-lived scontrol processes that
// read them on their input (session.go), else one process each
// (Config.Scontrol).
//
// Inventory and health come from `scontrol show nodes`, read at each
// poll of the engine (--engine-poll). A node is sold when its GRES has
// GPUs of one type that maps to a sold GPU model (Config.GPUModels,
// else DefaultModel) and, when Config.Partitions is set, it is in one of
// them. Its rack and zone come from features ("rack=r12", "zone=b");
// without a zone feature its zone is Slurm's ClusterName. A sold node is
// unhealthy while Slurm has it DOWN, DRAIN (drained or draining), FAIL
// or INVAL; the service then moves the blocks on it to replacement
// nodes, and their reservations follow.
//
// A block's steps, each idempotent, as the outbox applies them:
//
//	reserve    at the purchase and at each change of a waiting block:
//	           create the reservation, or update it to the block
//	activate   the same, at the start, after a replacement (new Nodes=)
//	           and after an extension (a later EndTime=)
//	terminate  SIGTERM the running jobs, bring their end forward to now
//	           + Grace (Slurm ends them then), cancel the pending ones
//	release    cancel the jobs left, delete the reservation
//
// The reservation names its nodes (Nodes=, capblock's placement), never
// a count: given NodeCnt=, Slurm chooses the nodes itself and silently
// grants fewer when fewer are free. It exists from the purchase, so that
// Slurm's scheduler starts no job there that would run into the block.
// Its users and accounts are the team's (Config.Teams, from the fleet
// file's slurm section); a team without them gets HoldUsers, so that its
// nodes are held all the same.
//
// Its flags: IGNORE_JOBS, at creation and whenever its nodes change,
// since Slurm otherwise refuses a reservation on a node where a job runs
// that started before the purchase, and the purchase is final; such a
// job runs on into the block (capblock does not cancel it). OVERLAP when
// the block holds part of a node, so that the blocks sharing the node
// can each have their reservation; jobs of either may then use the whole
// node, since reserving GPUs by count (TRES=gres/gpu:N) needs Slurm's
// accounting. No MAINT (it would charge the nodes' time as maintenance),
// no REPLACE_DOWN (capblock chooses the replacements), no PURGE_COMP (a
// block outlives its jobs).
package slurm
