package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"capblock/internal/core"
	"capblock/internal/store"
)

// maxAttempts bounds how many times Commit runs a change that the database
// aborted as a deadlock or a serialization failure.
const maxAttempts = 5

// Commit applies c in one transaction after re-checking it (see
// store.Store), with the sqlite driver's semantics. The overlap re-check
// is the exclusion constraint on allocations itself, checked at COMMIT on
// the state the change leaves behind: it also rejects overlaps between
// two blocks of one change and a block that becomes live again on GPUs
// taken meanwhile, and it ignores the allocations of blocks that are not
// live. Its violation is a conflict. (A query of the same overlaps before
// COMMIT, as the sqlite driver runs, would only repeat the constraint's
// index scans: it cost more than the rows' insertion.)
//
// The check costs a descent of the constraint's GiST index per row
// written (one per node of a block: 0019), logarithmic in the
// allocations stored: the index narrows to the node, its GPUs that the
// row holds and the ranges that meet the new one, so the node's other
// allocations are never read.
//
// Changes committed at the same time by this replica share a transaction
// (groupcommit.go): each is applied and re-checked on its own, in a
// savepoint, exclusion constraint included, and one that fails fails
// alone.
//
// A transaction that the database aborts as a deadlock or a serialization
// failure is run again alone, up to maxAttempts times in all, and then
// reported as a conflict, so that the service retries on a fresh snapshot.
//
// On success Commit also writes the new Version into c.Insert[i] and
// c.Update[i].Block, and the Seq into c.Events[i]: the slices are shared
// with the caller. Nothing is written into them when it fails.
func (s *Store) Commit(ctx context.Context, c store.Change) error {
	req, err := store.NewCommitRequest(ctx, c)
	if err != nil {
		return err
	}
	defer req.End()
	s.group.Do(req, s.commitGroup)
	// A change that the database aborted, in its group or alone, runs
	// again alone.
	for attempt := 1; req.Err != nil; attempt++ {
		if !retryable(req.Err) {
			return req.Err
		}
		s.retries.Inc()
		if attempt == maxAttempts {
			return fmt.Errorf("committing change: the database aborted it %d times (last: SQLSTATE %s): %w",
				attempt, sqlState(req.Err), store.ErrConflict)
		}
		req.Seqs, req.JournalSeqs, req.Err = s.commitOnce(ctx, req.Change, req.EventData, req.Used)
	}
	req.Committed()
	return nil
}

// commitOnce runs c in one transaction and returns the events' and the
// journals' Seq. Its
// statements travel in at most two pipelined batches and a COMMIT: a change
// without updates takes two round trips, one with updates three.
func (s *Store) commitOnce(ctx context.Context, c store.Change, eventData []string, used []store.UsedOffering) (_, _ []int64, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("beginning commit: %w", err)
	}
	defer conn.Release()
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	var tx pgx.Tx
	// Releasing a connection inside a transaction would close it: roll
	// back first, whatever happened (after COMMIT this does nothing).
	defer func() {
		if tx != nil {
			tx.Rollback(context.WithoutCancel(ctx))
		}
	}()

	// 1. Lock the blocks to update, in id order so that two commits never
	//    wait for each other in a cycle, and read what the update needs.
	var stored map[string]*storedBlock
	if len(c.Update) > 0 {
		queueLockBlocks(b, c.Update, &stored)
		br := conn.SendBatch(ctx, b)
		tx = br.Tx()
		if err := closeBatch(br); err != nil {
			return nil, nil, err
		}
		b = &pgx.Batch{}
	}

	// 2. Queue the node locks and the writes, and send them at once.
	w := &commitWriter{batch: b, stored: stored}
	if err := w.queue(c, eventData, used); err != nil {
		return nil, nil, err
	}
	var br pgx.BatchResults
	if tx == nil {
		br = conn.SendBatch(ctx, b)
		tx = br.Tx()
	} else {
		br = tx.SendBatch(ctx, b)
	}
	if err := closeBatch(br); err != nil {
		return nil, nil, err
	}

	// 3. Commit; the exclusion constraint is checked now.
	if err := tx.Commit(ctx); err != nil {
		return nil, nil, dbError("committing change", err)
	}
	return w.seqs, w.journalSeqs, nil
}

// stepError is the failure of one statement of a commit's batch, as its
// result handler explained it.
type stepError struct{ err error }

func (e *stepError) Error() string { return e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

// step marks the errors of a result handler as explained.
func step[T any](fn func(T) error) func(T) error {
	return func(v T) error {
		if err := fn(v); err != nil {
			return &stepError{err}
		}
		return nil
	}
}

// closeBatch reads the rest of a commit's batch. A statement's failure
// comes back as its handler explained it; any other (the connection, the
// BEGIN) gets the context it lacks.
func closeBatch(br pgx.BatchResults) error {
	err := br.Close()
	var se *stepError
	if errors.As(err, &se) {
		return se.err
	}
	if err != nil {
		return dbError("committing change", err)
	}
	return nil
}

// storedBlock is what Commit reads of a block it updates.
type storedBlock struct {
	start, end time.Time
	state      core.BlockState
	version    int64
	placements []core.Placement
}

// queueLockBlocks queues the SELECT … FOR UPDATE of the updated blocks,
// which fills *stored.
func queueLockBlocks(b *pgx.Batch, updates []store.BlockUpdate, stored *map[string]*storedBlock) {
	ids := make([]string, 0, len(updates))
	for _, u := range updates {
		ids = append(ids, u.Block.ID)
	}
	b.Queue(`SELECT id, start_time, end_time, state, version, placements FROM blocks
		WHERE id = ANY($1) ORDER BY id FOR UPDATE`, ids).Query(step(func(rows pgx.Rows) error {
		m := make(map[string]*storedBlock, len(ids))
		for rows.Next() {
			var (
				id, state, placements string
				sb                    storedBlock
			)
			if err := rows.Scan(&id, &sb.start, &sb.end, &state, &sb.version, &placements); err != nil {
				return dbError("locking blocks to update", err)
			}
			sb.state = core.BlockState(state)
			var err error
			if sb.placements, err = store.DecodePlacements(placements); err != nil {
				return fmt.Errorf("block %s: %w", id, err)
			}
			m[id] = &sb
		}
		if err := rows.Err(); err != nil {
			return dbError("locking blocks to update", err)
		}
		*stored = m
		return nil
	}))
}

// commitWriter queues the statements of one commit on a batch. Each
// statement's result handler names what it was doing, so the first
// failure of the batch reads like the sqlite driver's.
type commitWriter struct {
	batch  *pgx.Batch
	stored map[string]*storedBlock
	seqs   []int64
	// journalSeqs are the Seq of the change's journals.
	journalSeqs []int64
}

// queue queues c's statements, in the order of the sqlite driver.
func (w *commitWriter) queue(c store.Change, eventData []string, used []store.UsedOffering) error {
	w.queueNodeLocks(c)
	for _, g := range sortedGuards(c.Budgets) {
		w.queueBudget(g, c.Journals)
	}
	for _, r := range c.Idempotency {
		w.queueIdempotency(r)
	}
	for i, u := range used {
		w.queueUsedOffering(c.Offerings[i], u)
	}
	for _, u := range c.Update {
		if err := w.queueUpdate(u); err != nil {
			return err
		}
	}
	for _, b := range c.Insert {
		w.queueInsert(b)
	}
	for _, p := range c.InsertPlans {
		if err := w.queueInsertPlan(p); err != nil {
			return err
		}
	}
	for _, sr := range c.InsertSeries {
		if err := w.queueInsertSeries(sr); err != nil {
			return err
		}
	}
	for _, o := range c.InsertOrders {
		if err := w.queueInsertOrder(o); err != nil {
			return err
		}
	}
	for _, u := range c.UpdateOrders {
		if err := w.queueUpdateOrder(u); err != nil {
			return err
		}
	}
	for _, j := range c.Jobs {
		w.queueJob(j)
	}
	for _, h := range c.Handovers {
		w.queueHandover(h)
	}
	w.queueActions(c.Actions)
	w.queueNodeHealth(c.NodeHealth)
	w.queueJournals(c.Journals)
	w.queueEvents(c.Events, eventData)
	queueAudit(w.batch, c.Audit)
	w.queueNotify(c)
	return nil
}

// exec queues a statement; check, when set, judges its command tag.
func (w *commitWriter) exec(what string, check func(pgconn.CommandTag) error, sql string, args ...any) {
	w.batch.Queue(sql, args...).Fn = step(func(br pgx.BatchResults) error {
		tag, err := br.Exec()
		if err != nil {
			return dbError(what, err)
		}
		if check != nil {
			return check(tag)
		}
		return nil
	})
}

func (w *commitWriter) queueIdempotency(r store.IdempotencyRecord) {
	what := fmt.Sprintf("storing idempotency key of team %s", r.Team)
	w.exec(what, func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("client token %q of team %s is already used: %w", r.ClientToken, r.Team, store.ErrConflict)
		}
		return nil
	}, `INSERT INTO idempotency (team, client_token, request_hash, subject, created_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (team, client_token) DO NOTHING`,
		r.Team, r.ClientToken, r.RequestHash, r.Subject, seconds(r.CreatedAt))
}

// queueUsedOffering records an offering as used. A commit racing another
// that uses the same offering waits at the INSERT for the other's end and
// then finds the row, or takes it if the other rolled back.
func (w *commitWriter) queueUsedOffering(id string, u store.UsedOffering) {
	w.exec("storing used offering "+store.ShortOfferingID(id), func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() == 0 {
			return store.OfferingUsedError(id)
		}
		return nil
	}, `INSERT INTO used_offerings (hash, expires_at) VALUES ($1, $2) ON CONFLICT (hash) DO NOTHING`,
		u.Hash, seconds(u.ExpiresAt))
}

func (w *commitWriter) queueInsert(b core.Block) {
	w.exec(fmt.Sprintf("inserting block %s", b.ID), nil,
		`INSERT INTO blocks (`+blockSelect+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, 1, $18, $19, $20)`,
		b.ID, b.Name, b.Team, b.InstanceType, b.GPUModel, b.Count, b.Zone,
		seconds(b.Start), seconds(b.End), string(b.State), b.Fee.Minor, b.Fee.Currency,
		seconds(b.CreatedAt), store.EncodeTags(b.Tags), store.EncodePlacements(b.Placements), b.Warned, b.Terminating, b.PlanID, b.Lending, b.Trace)
	w.queueAllocations(b.ID, seconds(b.Start), seconds(b.End), b.State.Live(), b.Placements)
}

// queueUpdate checks u against the locked row and queues its writes.
func (w *commitWriter) queueUpdate(u store.BlockUpdate) error {
	b := u.Block
	sb, ok := w.stored[b.ID]
	if !ok {
		return fmt.Errorf("updating block %s: it does not exist: %w", b.ID, store.ErrConflict)
	}
	if sb.version != u.ExpectedVersion {
		return fmt.Errorf("updating block %s: version is %d, expected %d: %w",
			b.ID, sb.version, u.ExpectedVersion, store.ErrConflict)
	}
	if !seconds(b.Start).Equal(sb.start) {
		return fmt.Errorf("updating block %s: %w", b.ID,
			core.Invalidf("start %s differs from the stored %s; a block's start does not change",
				b.Start.UTC(), sb.start.UTC()))
	}
	var placements any // NULL keeps the stored placements
	if u.Replace {
		placements = store.EncodePlacements(b.Placements)
	}
	newEnd := seconds(b.End)
	what := fmt.Sprintf("updating block %s", b.ID)
	w.exec(what, func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != 1 { // the row is locked: only a bug gets here
			return fmt.Errorf("%s: version %d is gone: %w", what, u.ExpectedVersion, store.ErrConflict)
		}
		return nil
	}, `UPDATE blocks SET name = $1, state = $2, end_time = $3, tags = $4,
		warned = $5, terminating = $6, fee_minor = $7, fee_currency = $8,
		placements = coalesce($9, placements), lending = $12, version = version + 1
		WHERE id = $10 AND version = $11`,
		b.Name, string(b.State), newEnd, store.EncodeTags(b.Tags), b.Warned, b.Terminating,
		b.Fee.Minor, b.Fee.Currency, placements, b.ID, u.ExpectedVersion, b.Lending)

	live, wasLive := b.State.Live(), sb.state.Live()
	switch {
	case u.Replace:
		w.exec(fmt.Sprintf("deleting allocations of block %s", b.ID), nil,
			`DELETE FROM allocations WHERE block_id = $1`, b.ID)
		w.queueAllocations(b.ID, u.ReplacedFrom(sb.start, newEnd), newEnd, live, b.Placements)
		sb.placements = b.Placements
	case !newEnd.Equal(sb.end) || live != wasLive:
		w.exec(fmt.Sprintf("updating allocations of block %s", b.ID), nil,
			`UPDATE allocations SET during = tstzrange(lower(during), $2), live = $3 WHERE block_id = $1`,
			b.ID, newEnd, live)
	}
	// A later update of the same block in this change sees this one.
	sb.version, sb.end, sb.state = u.ExpectedVersion+1, newEnd, b.State
	return nil
}

// queueAllocations stores one row per node of placements over [start,
// end), holding that node's GPUs of the placement (0019), in one
// statement whatever their number.
func (w *commitWriter) queueAllocations(id string, start, end time.Time, live bool, placements []core.Placement) {
	var nodes, gpus []string
	for _, p := range placements {
		if len(p.GPUs) > 0 {
			nodes = append(nodes, p.Node)
			gpus = append(gpus, gpuRanges(p.GPUs))
		}
	}
	if len(nodes) == 0 {
		return
	}
	w.queueNodes(nodes)
	what := fmt.Sprintf("inserting allocations of block %s", id)
	w.exec(what, func(tag pgconn.CommandTag) error {
		// A node without a number would drop its rows from the join.
		if got := tag.RowsAffected(); got != int64(len(nodes)) {
			return fmt.Errorf("%s: %d of %d rows stored (a node has no number)", what, got, len(nodes))
		}
		return nil
	}, `INSERT INTO allocations (block_id, node, gpus, during, live)
		SELECT $1, n.id, a.gpus::int4multirange, tstzrange($2, $3), $4
		FROM unnest($5::text[], $6::text[]) AS a (name, gpus) JOIN nodes n ON n.name = a.name`,
		id, start, end, live, nodes, gpus)
}

// gpuRanges writes GPU indexes as an int4multirange literal: {[0,8)}
// for 0 to 7, {[0,2),[5,6)} for 0, 1 and 5.
func gpuRanges(gpus []int) string {
	sorted := slices.Clone(gpus)
	slices.Sort(sorted)
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i < len(sorted); {
		j := i + 1
		for j < len(sorted) && sorted[j] <= sorted[j-1]+1 {
			j++
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "[%d,%d)", sorted[i], sorted[j-1]+1)
		i = j
	}
	b.WriteByte('}')
	return b.String()
}

// queueNodes numbers the nodes of names that have no number yet (see
// 0007_node_ids). Two commits that number one node wait for each other
// on the unique name, but they already hold that node's lock in turn.
func (w *commitWriter) queueNodes(names []string) {
	w.exec("numbering nodes", nil,
		`INSERT INTO nodes (name) SELECT DISTINCT unnest($1::text[]) ORDER BY 1 ON CONFLICT (name) DO NOTHING`, names)
}

// queueEvents inserts the events while holding the events lock shared:
// Events takes it exclusively, so it reads only when no commit holds a seq
// without having committed it (see Events).
func (w *commitWriter) queueEvents(events []core.Event, data []string) {
	if len(events) == 0 {
		return
	}
	w.exec("locking events", nil, `SELECT pg_advisory_xact_lock_shared($1, 0)`, eventLockClass)
	w.seqs = make([]int64, len(events))
	for i, e := range events {
		w.batch.Queue(`INSERT INTO events (id, time, type, subject, team, data)
			VALUES ($1, $2, $3, $4, $5, $6) RETURNING seq`,
			e.ID, seconds(e.Time), e.Type, e.Subject, e.Team, data[i]).QueryRow(step(func(row pgx.Row) error {
			if err := row.Scan(&w.seqs[i]); err != nil {
				return dbError(fmt.Sprintf("inserting event %s", e.ID), err)
			}
			return nil
		}))
	}
}

// queueJournals inserts the journals, each with its postings in one
// statement, and collects their Seq.
func (w *commitWriter) queueJournals(js []core.Journal) {
	w.journalSeqs = make([]int64, len(js))
	for i, j := range js {
		w.batch.Queue(`INSERT INTO journals (id, time, kind, subject, instance_type, currency)
			VALUES ($1, $2, $3, $4, $5, $6) RETURNING seq`,
			j.ID, seconds(j.Time), j.Kind, j.Subject, j.InstanceType, j.Currency).QueryRow(step(func(row pgx.Row) error {
			if err := row.Scan(&w.journalSeqs[i]); err != nil {
				return dbError(fmt.Sprintf("inserting journal %s", j.ID), err)
			}
			return nil
		}))
		n := len(j.Postings)
		ns, accounts, teams, kinds, subjects := make([]int32, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		amounts, onDemand := make([]int64, n), make([]int64, n)
		for k, p := range j.Postings {
			ns[k], accounts[k], teams[k], kinds[k], subjects[k] = int32(k), p.Account, p.Team, p.Kind, p.Subject
			amounts[k], onDemand[k] = p.Amount, p.OnDemand
		}
		w.exec(fmt.Sprintf("inserting the postings of journal %s", j.ID), nil,
			`INSERT INTO postings (journal, n, account, team, kind, time, amount_minor, on_demand_minor, subject)
			SELECT $1, n, account, team, kind, $6, amount, on_demand, subject
			FROM unnest($2::int[], $3::text[], $4::text[], $5::text[], $7::bigint[], $8::bigint[], $9::text[])
				AS p(n, account, team, kind, amount, on_demand, subject)`,
			j.ID, ns, accounts, teams, kinds, seconds(j.Time), amounts, onDemand, subjects)
	}
}

// sortedGuards orders budget guards by team, so that commits lock teams
// in one order and never deadlock on each other.
func sortedGuards(gs []core.BudgetGuard) []core.BudgetGuard {
	out := append([]core.BudgetGuard(nil), gs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Team < out[j].Team })
	return out
}

// queueNodeLocks locks, before anything is written, every node whose
// allocations the change writes (those its blocks hold now and, for an
// update, those they held before), in one order, so that commits on one
// node run one after the other. Without the locks two of them could wait
// for each other in a cycle at COMMIT, each for the other's uncommitted
// rows under the deferred exclusion constraint, which only PostgreSQL's
// deadlock detection breaks, a second later each time.
func (w *commitWriter) queueNodeLocks(c store.Change) {
	set := map[int32]bool{}
	add := func(ps []core.Placement) {
		for _, p := range ps {
			set[lockKey(p.Node)] = true
		}
	}
	for _, b := range c.Insert {
		add(b.Placements)
	}
	for _, u := range c.Update {
		add(u.Block.Placements)
		if sb, ok := w.stored[u.Block.ID]; ok {
			add(sb.placements)
		}
	}
	if len(set) == 0 {
		return
	}
	keys := slices.Sorted(maps.Keys(set))
	w.exec("locking nodes", nil,
		`SELECT pg_advisory_xact_lock($1, k) FROM unnest($2::int4[]) WITH ORDINALITY AS u (k, i) ORDER BY i`,
		nodeLockClass, keys)
}
