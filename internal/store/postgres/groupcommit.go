package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"

	"capblock/internal/store"
)

// Group commit (see store.CommitGroup): the changes one replica commits
// while groupWriters transactions of its own are already being written
// share the next transaction. A lone change runs as it did
// alone (commitOnce). A group of several runs in four steps:
//
//  1. BEGIN, and every block that any change of the group updates
//     locked FOR UPDATE and read, in id order;
//  2. (in the same round trip when no change updates a block) the locks of every node and every budget that any change takes, in
//     their order, so that two groups (or a group and a lone commit, on
//     this replica or another) take them in the same order and never
//     wait for each other in a cycle;
//  3. each change in a savepoint of its own, in one round trip, with its
//     checks (versions, idempotency keys, used offerings, budgets) and
//     then the exclusion constraint checked at once (SET CONSTRAINTS …
//     IMMEDIATE) on the state the changes before it left: the constraint
//     is still the last word on overlaps, for each change alone. A
//     change that fails is rolled back to its savepoint and fails alone
//     (a change that succeeds releases its savepoint at the start of the
//     next round trip); one that the database
//     aborted as a deadlock or a serialization failure is run again
//     alone, after the group;
//  4. COMMIT (which commits the last savepoint too). Nothing is answered
//     before it. If it fails, every change
//     the group holds fails with it (run again alone when the database
//     aborted it).

// maxGroup is the most changes one transaction takes. Each holds a
// subtransaction, and PostgreSQL keeps at most 64 of them in a session's
// shared cache before every other session's snapshot has to look them up.
const maxGroup = 32

// groupWriters is how many groups one replica writes at once, each on a
// connection of its own: PostgreSQL runs transactions side by side, so a
// replica's commits form groups only when that many are already being
// written, and a lone replica keeps the parallelism it had before.
const groupWriters = 4

// exclusionConstraint is the overlap check on allocations (0007_node_ids).
const exclusionConstraint = "allocations_no_overlap"

// commitGroup commits batch and sets each request's answer.
func (s *Store) commitGroup(batch []*store.CommitRequest) {
	for _, r := range batch {
		r.Group = len(batch)
	}
	if len(batch) == 1 {
		r := batch[0]
		r.Seqs, r.JournalSeqs, r.Err = s.commitOnce(r.Ctx, r.Change, r.EventData, r.Used)
		return
	}
	fail := func(rs []*store.CommitRequest, err error) {
		for _, r := range rs {
			r.Err = err
		}
	}
	// The transaction is the group's: one caller's cancellation ends only
	// its own change, which is not sent once its caller has gone.
	ctx := context.Background()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		fail(batch, fmt.Errorf("beginning commit: %w", err))
		return
	}
	defer conn.Release()
	var tx pgx.Tx
	defer func() {
		if tx != nil {
			tx.Rollback(ctx)
		}
	}()

	// 1. BEGIN and the blocks to update.
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	var updates []store.BlockUpdate
	for _, r := range batch {
		updates = append(updates, r.Change.Update...)
	}
	stored := map[string]*storedBlock{}
	if len(updates) > 0 {
		queueLockBlocks(b, updates, &stored)
	}
	// 2. The node and budget locks of every change, in order: with BEGIN
	//    when no change updates a block, else once the blocks are read
	//    (they name the nodes the updates leave).
	changes := make([]store.Change, len(batch))
	for i, r := range batch {
		changes[i] = r.Change
	}
	if len(updates) == 0 {
		(&commitWriter{batch: b}).queueGroupLocks(changes)
	}
	br := conn.SendBatch(ctx, b)
	tx = br.Tx()
	if err := closeBatch(br); err != nil {
		fail(batch, err)
		return
	}
	if len(updates) > 0 {
		locks := &commitWriter{batch: &pgx.Batch{}, stored: stored}
		locks.queueGroupLocks(changes)
		if err := closeBatch(tx.SendBatch(ctx, locks.batch)); err != nil {
			fail(batch, err)
			return
		}
	}

	// 3. Each change in its savepoint. The next round trip begins by
	//    releasing the savepoint of the change before, when it holds.
	var applied []*store.CommitRequest
	release := false
	for i, r := range batch {
		if err := r.Ctx.Err(); err != nil {
			r.Err = fmt.Errorf("committing change: %w", err)
			continue
		}
		w := &commitWriter{batch: &pgx.Batch{}, stored: ownStored(stored, r.Change.Update)}
		if release {
			w.exec("ending the savepoint of the change before", nil, `RELEASE SAVEPOINT change`)
		}
		w.exec("beginning a change of the group", nil, `SAVEPOINT change`)
		w.exec("beginning a change of the group", nil, `SET CONSTRAINTS `+exclusionConstraint+` DEFERRED`)
		if err := w.queue(r.Change, r.EventData, r.Used); err != nil {
			// Found before anything of it was sent: nothing is sent, and
			// the release waits for the next round trip.
			r.Err = err
			continue
		}
		w.exec("checking for overlaps", nil, `SET CONSTRAINTS `+exclusionConstraint+` IMMEDIATE`)
		if err := closeBatch(tx.SendBatch(ctx, w.batch)); err != nil {
			r.Err = err
			// At once and in the simple protocol: a transaction the
			// failure aborted takes nothing else, not even the
			// preparation of the next change's statements.
			if _, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT change; RELEASE SAVEPOINT change`); err != nil {
				err = dbError("committing change: rolling back a change of its group", err)
				fail(applied, err)
				for _, o := range batch[i+1:] {
					o.Err = err
				}
				return
			}
			release = false
			continue
		}
		release = true
		maps.Copy(stored, w.stored)
		r.Seqs, r.JournalSeqs = w.seqs, w.journalSeqs
		applied = append(applied, r)
	}
	if len(applied) == 0 {
		return
	}

	// 4. COMMIT, which also commits the last change's savepoint, still
	//    open.
	if err := tx.Commit(ctx); err != nil {
		fail(applied, dbError("committing change", err))
	}
}

// ownStored copies the stored blocks that updates change, for one change
// of a group: a change that fails must not leave its versions and ends
// to the changes after it.
func ownStored(stored map[string]*storedBlock, updates []store.BlockUpdate) map[string]*storedBlock {
	own := make(map[string]*storedBlock, len(updates))
	for _, u := range updates {
		if sb, ok := stored[u.Block.ID]; ok {
			c := *sb
			own[u.Block.ID] = &c
		}
	}
	return own
}

// queueGroupLocks queues the node locks and then the budget locks of
// every change of a group, each set in the order a lone commit takes it.
func (w *commitWriter) queueGroupLocks(cs []store.Change) {
	var nodes store.Change
	var teams []string
	for _, c := range cs {
		nodes.Insert = append(nodes.Insert, c.Insert...)
		nodes.Update = append(nodes.Update, c.Update...)
		for _, g := range c.Budgets {
			teams = append(teams, g.Team)
		}
	}
	w.queueNodeLocks(nodes)
	keys := make([]int32, 0, len(teams))
	for _, t := range slices.Compact(slices.Sorted(slices.Values(teams))) {
		keys = append(keys, lockKey(t))
	}
	if len(keys) > 0 {
		w.exec("locking budgets", nil,
			`SELECT pg_advisory_xact_lock($1, k) FROM unnest($2::int4[]) WITH ORDINALITY AS u (k, i) ORDER BY i`,
			teamLockClass, keys)
	}
}
