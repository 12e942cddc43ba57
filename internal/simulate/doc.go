// Package simulate is a deterministic simulation of the whole service
// (DESIGN.md, point 22: FoundationDB's simulation, TigerBeetle's VOPR):
// the real service (service.New, called through Guarded with a
// principal, as the front ends call it) on a real SQLite store and the
// simulated engine, under a simulated clock, driven one step at a time
// by one seed that decides everything: each operation, its arguments and
// the faults.
//
// The faults are a store whose commits fail before they are durable or
// lose their answer once they are, and so do the outbox's records of the
// engine actions it applied (faultStore); commits that take minutes of
// the clock (faultlatency.go); an engine whose calls fail, lose their
// answer, or hang until the caller's deadline and reach the engine later,
// out of order, or never (faultEngine, faultlate.go); crashes (the
// service dropped between steps, or during a commit, and started again
// on the same database file, as `capblock serve` starts: faultcrash.go);
// a leader deposed while its engine call hangs, which goes on with its
// pass while a new server leads (faultleader.go); nodes failing and
// recovering; and the clock moving. The leader's work runs as steps too
// (service.LeadOnce), not on goroutines of its own, so that nothing runs
// between steps. The operations are those of clients: searches and purchases
// under client tokens, retried after a lost answer, cancellations,
// extensions, transfers, releases for resale, plans, series of
// recurring blocks, standing orders (which the leader serves), the
// lending of a block's GPUs; and the operator's: approvals, node
// health, teams and users disabled, nodes gained or lost between
// restarts. Jobs on blocks and spot jobs on backfill are created,
// stopped and reached for across teams; their instances run on simulated
// workloads (simworkloads.go) that the leader's pass drives
// (service.JobsOnce, in LeadOnce), that outlive crashes (the next leader
// adopts them), whose starts and stops fail or lose their answer, and
// whose instances exit (succeed, fail, crash) when a step says so, their
// ends reported at once or late.
//
// After every step the checker reads what the step stored (the events
// and journals after the last it read, the blocks they name) and checks
// DESIGN.md's invariants against it and against the simulation's record
// of what was acknowledged: no GPU in two live blocks at once; every
// acknowledged change durable, across crashes too; a client token buys
// once and charges once; the fee charged is the fee quoted; every
// journal balances and budgets hold; every change of a block is an
// event; the engine never takes a write older than one it took, and the
// store takes no claim or record of a deposed leader; every instance
// starts on GPUs of an active block of its own team that holds them (a
// spot one on GPUs no block holds or one lends), on no GPU another live
// instance has, never twice, and every job's state is its events'
// (jobcheck.go). A seed ends with the world healed (no more faults) and the
// leader stepped until nothing is pending: the engine then holds exactly
// the store's active blocks, the workloads exactly the instances of the
// store's running jobs, and no block has a lifecycle step overdue.
//
// A failure names its seed and step; the same seed replays the same
// operations, faults and answers (the service's ids too, in a test that
// fixes crypto/rand: see TestSimulate), so one command reproduces it.
// scripts/soak.sh runs seeds on every core for as long as asked.
package simulate
