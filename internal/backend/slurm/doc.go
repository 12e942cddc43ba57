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
//
// # Convergence
//
// The actions tell Slurm what changed, once; the convergence
// (converge.go) keeps it told. The leader hands the backend the desired
// state (backend.Converger: the live blocks at their stored versions,
// and the unsettled ones), and every Config.ConvergePoll (default 2 s)
// the backend reads every reservation (`scontrol show reservation`, one
// command) and compares:
//
//   - a live block whose reservation is missing, or differs from the
//     block (nodes, a start not yet reached, end, users, accounts, its
//     version), is repaired: read again under the block's lock, then
//     created or updated, as Activate does;
//   - a reservation named like a block (cb-…) whose block is not live
//     is deleted: at once if it records no version of capblock's (this
//     capblock did not write it so), else once it has stayed unknown for
//     backend.UnknownGrace, since the leader's index may not yet show a
//     block that an action already reserved. Slurm refuses to delete a
//     reservation in which jobs run: the pass leaves the jobs be
//     (Release cancels them, on a block the store has settled) and tries
//     again at the next;
//   - the blocks in Unsettled are left alone, and so is every
//     reservation whose name is not a block's: an operator's
//     maintenance on the same nodes (MAINT lets it share them) is never
//     touched.
//
// A repair skips a block whose action holds its lock at that moment
// (the next pass looks again); an action waits for a repair in
// progress. Converge(nil) stops the passes (the one in progress is
// cancelled), and Close does too, for good.
//
// # The version fence
//
// Each write of a block's reservation records the block's version
// (core.Block.Version, from the action's payload or the desired state).
// Slurm 22.05 has no comment on reservations: `scontrol create
// reservation … Comment=…` and `scontrol update … Comment=…` are refused
// ("Unknown parameter Comment"); the Features of a reservation of named
// nodes cannot be updated, and would choose nodes. What Slurm keeps,
// prints and saves with its state, and does not otherwise read when no
// burst buffer plugin is configured, is the reservation's BurstBuffer
// field: the backend writes "BurstBuffer=capblock:v=<version>" there,
// and only when slurmctld's BurstBufferType is unset (New reads it).
// Where a plugin is configured the field would be a request for buffer
// space, and the versions are kept in the backend's memory only (New
// logs a warning). Slurm 23.02 added a Comment to reservations, which
// this backend does not use yet.
//
// A Reserve, Activate, Release or repair of an older version than the
// one the reservation records, or than the one this process last wrote
// or read of it (its memory also keeps the version of a release, after
// the reservation is gone), is refused: nothing is applied, a warning
// is logged, StaleWrites counts it, and the action reports success,
// since the engine already holds a later version and no retry could
// apply this one (fenced, in fence.go). Terminate, which writes no
// reservation, is fenced by the memory only. A pass whose desired state
// is older than the reservation leaves it be, quietly: the leader's
// index lags behind the action that wrote it.
//
// What the fence cannot do. Slurm has no conditional update: the check
// reads the reservation, then writes, and a write of another process
// between the two is not seen. Reserve's fast path (updateRemembered)
// writes from what this process last wrote, without reading, so that
// until it reads again its fence is its memory: a pass of the
// convergence forgets what it remembers of a reservation that it reads
// otherwise (another process wrote it), and Converge(nil), when this
// replica stops leading, forgets all it remembers, so that a late write
// reads first. A deleted reservation records nothing in Slurm: a late
// write from another process may create it again, and the leader's
// convergence deletes it after UnknownGrace. On a cluster with a burst
// buffer plugin the fence holds within one process only.
package slurm
