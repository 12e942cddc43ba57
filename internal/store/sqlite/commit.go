package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"capblock/internal/core"
	"capblock/internal/store"
)

// Commit applies c in one BEGIN IMMEDIATE transaction after re-checking it
// (see store.Store). The overlap check runs on the state the change leaves
// behind and enforces exactly "no two live allocations share a GPU at the
// same time": it also rejects overlaps between two blocks of the same
// change and a block that becomes live again on GPUs taken meanwhile, and
// it does not check the allocations of blocks that are not live, which
// hold nothing.
//
// Changes committed at the same time share a transaction and its fsync
// (groupcommit.go): each is applied and re-checked on its own, in a
// savepoint, on the state the ones before it left, and one that fails
// fails alone. Commit returns once its group is durable.
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
	if req.Err != nil {
		return req.Err
	}
	req.Committed()
	return nil
}

// commitTx is one Commit's transaction.
type commitTx struct {
	ctx  context.Context // for statements, never cancelled
	done context.Context // the caller's context
	tx   *sql.Tx
	ws   *writeStmts
	// journalSeqs are the Seq of the change's journals, once written.
	journalSeqs []int64
}

// canceled returns the caller's context error, if any.
func (w *commitTx) canceled() error {
	if err := w.done.Err(); err != nil {
		return fmt.Errorf("committing change: %w", err)
	}
	return nil
}

// stmt binds a prepared statement to the transaction; database/sql reuses
// the statement already prepared on the writer connection.
func (w *commitTx) stmt(st *sql.Stmt) *sql.Stmt { return w.tx.StmtContext(w.ctx, st) }

// apply writes the change and re-checks it; it returns the events' Seq.
func (w *commitTx) apply(c store.Change, eventData []string, used []store.UsedOffering) ([]int64, error) {
	// 0. The budget guard, before anything is written: the transaction
	//    holds the write lock, so no other commit spends meanwhile.
	for _, g := range c.Budgets {
		if err := w.checkBudget(g, c.Journals); err != nil {
			return nil, err
		}
	}
	// 1. Idempotency keys: the cheapest check, and the one a retried
	//    purchase fails.
	for _, r := range c.Idempotency {
		if err := w.insertIdempotency(r); err != nil {
			return nil, err
		}
	}
	//    The offerings it consumes, after the keys: a retry of the
	//    purchase that used one fails on its key, as a conflict.
	for i, u := range used {
		if err := w.insertUsedOffering(c.Offerings[i], u); err != nil {
			return nil, err
		}
	}
	if err := w.canceled(); err != nil {
		return nil, err
	}
	// 2. Updates, each checked against its expected version; recheck
	//    collects the blocks whose allocations moved, grew or came back
	//    to life.
	var recheck []allocated
	for _, u := range c.Update {
		moved, err := w.updateBlock(u)
		if err != nil {
			return nil, err
		}
		if moved {
			recheck = append(recheck, allocated{u.Block.ID, u.Block.End.Unix(), gpuRefs(u.Block.Placements)})
		}
	}
	if err := w.canceled(); err != nil {
		return nil, err
	}
	// 3. Inserts.
	for _, b := range c.Insert {
		if err := w.insertBlock(b); err != nil {
			return nil, err
		}
		if b.State.Live() {
			recheck = append(recheck, allocated{b.ID, b.End.Unix(), gpuRefs(b.Placements)})
		}
	}
	for _, p := range c.InsertPlans {
		if err := w.insertPlan(p); err != nil {
			return nil, err
		}
	}
	for _, sr := range c.InsertSeries {
		if err := w.insertSeries(sr); err != nil {
			return nil, err
		}
	}
	for _, o := range c.InsertOrders {
		if err := w.insertOrder(o); err != nil {
			return nil, err
		}
	}
	for _, u := range c.UpdateOrders {
		if err := w.updateOrder(u); err != nil {
			return nil, err
		}
	}
	if err := w.canceled(); err != nil {
		return nil, err
	}
	// 4. The overlap re-check, on the state the change leaves behind.
	for _, a := range recheck {
		if err := w.checkOverlap(a); err != nil {
			return nil, err
		}
	}
	if err := w.canceled(); err != nil {
		return nil, err
	}
	// 5. Jobs, the engine actions and node health the change causes,
	//    ledger and events.
	for _, j := range c.Jobs {
		if err := w.writeJob(j); err != nil {
			return nil, err
		}
	}
	for _, h := range c.Handovers {
		if err := w.writeHandover(h); err != nil {
			return nil, err
		}
	}
	for _, a := range c.Actions {
		if err := w.insertAction(a); err != nil {
			return nil, err
		}
	}
	for _, h := range c.NodeHealth {
		if err := w.putNodeHealth(h); err != nil {
			return nil, err
		}
	}
	for _, j := range c.Journals {
		if err := w.insertJournal(j); err != nil {
			return nil, err
		}
	}
	for _, r := range c.Audit {
		if err := insertAudit(w.ctx, w.tx, r); err != nil {
			return nil, err
		}
	}
	seqs := make([]int64, len(c.Events))
	for i, e := range c.Events {
		seq, err := w.insertEvent(e, eventData[i])
		if err != nil {
			return nil, err
		}
		seqs[i] = seq
	}
	return seqs, nil
}

func (w *commitTx) insertIdempotency(r store.IdempotencyRecord) error {
	res, err := w.stmt(w.ws.insertIdempotency).ExecContext(w.ctx,
		r.Team, r.ClientToken, r.RequestHash, r.Subject, unixSeconds(r.CreatedAt))
	if err != nil {
		return fmt.Errorf("storing idempotency key of team %s: %w", r.Team, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("storing idempotency key of team %s: %w", r.Team, err)
	} else if n == 0 {
		return fmt.Errorf("client token %q of team %s is already used: %w", r.ClientToken, r.Team, store.ErrConflict)
	}
	return nil
}

func (w *commitTx) insertUsedOffering(id string, u store.UsedOffering) error {
	res, err := w.stmt(w.ws.insertUsed).ExecContext(w.ctx, u.Hash, unixSeconds(u.ExpiresAt))
	if err != nil {
		return fmt.Errorf("storing used offering %s: %w", store.ShortOfferingID(id), err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("storing used offering %s: %w", store.ShortOfferingID(id), err)
	} else if n == 0 {
		return store.OfferingUsedError(id)
	}
	return nil
}

func (w *commitTx) insertBlock(b core.Block) error {
	_, err := w.stmt(w.ws.insertBlock).ExecContext(w.ctx,
		b.ID, b.Name, b.Team, b.InstanceType, b.GPUModel, b.Count, b.Zone,
		unixSeconds(b.Start), unixSeconds(b.End), string(b.State),
		b.Fee.Minor, b.Fee.Currency, unixSeconds(b.CreatedAt), store.EncodeTags(b.Tags),
		store.EncodePlacements(b.Placements), boolInt(b.Warned), boolInt(b.Terminating), b.PlanID, boolInt(b.Lending), b.Trace)
	if isConstraint(err) {
		return fmt.Errorf("inserting block %s: it already exists: %w", b.ID, store.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("inserting block %s: %w", b.ID, err)
	}
	if !b.State.Live() {
		return nil // holds nothing
	}
	return w.insertAllocations(b.ID, b.Start.Unix(), b.End.Unix(), b.Placements)
}

// updateBlock applies u after checking its version. It reports whether the
// block's allocations must be re-checked for overlaps.
func (w *commitTx) updateBlock(u store.BlockUpdate) (recheck bool, err error) {
	b := u.Block
	var (
		start, end, version int64
		state, placed       string
	)
	err = w.stmt(w.ws.selectForUpdate).QueryRowContext(w.ctx, b.ID).Scan(&start, &end, &state, &version, &placed)
	if errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("updating block %s: it does not exist: %w", b.ID, store.ErrConflict)
	}
	if err != nil {
		return false, fmt.Errorf("reading block %s: %w", b.ID, err)
	}
	if version != u.ExpectedVersion {
		return false, fmt.Errorf("updating block %s: version is %d, expected %d: %w",
			b.ID, version, u.ExpectedVersion, store.ErrConflict)
	}
	if b.Start.Unix() != start {
		return false, fmt.Errorf("updating block %s: %w", b.ID,
			core.Invalidf("start %s differs from the stored %s; a block's start does not change",
				b.Start.UTC(), fromUnix(start)))
	}
	var placements any // NULL keeps the stored placements
	if u.Replace {
		placements = store.EncodePlacements(b.Placements)
	}
	newEnd := b.End.Unix()
	if _, err := w.stmt(w.ws.updateBlock).ExecContext(w.ctx,
		b.Name, string(b.State), newEnd, store.EncodeTags(b.Tags),
		boolInt(b.Warned), boolInt(b.Terminating), b.Fee.Minor, b.Fee.Currency, boolInt(b.Lending),
		placements, b.ID, version); err != nil {
		return false, fmt.Errorf("updating block %s: %w", b.ID, err)
	}

	// The rows the block holds now: its stored placements up to its
	// stored end, if it was live.
	live, wasLive := b.State.Live(), core.BlockState(state).Live()
	if !u.Replace && newEnd == end && live == wasLive {
		return false, nil
	}
	var held []gpuRef
	if wasLive {
		stored, err := store.DecodePlacements(placed)
		if err != nil {
			return false, fmt.Errorf("reading the placements of block %s: %w", b.ID, err)
		}
		held = gpuRefs(stored)
	}
	switch {
	case u.Replace:
		if err := w.execAllocations(allocDelete, "deleting", b.ID, held, end); err != nil {
			return false, err
		}
		if live {
			if err := w.insertAllocations(b.ID, u.ReplacedFrom(fromUnix(start), b.End).Unix(), newEnd, b.Placements); err != nil {
				return false, err
			}
		}
	case live && wasLive: // its end moved
		if err := w.execAllocations(allocEnd, "ending", b.ID, held, end, newEnd); err != nil {
			return false, err
		}
	case wasLive: // no longer live: it holds nothing
		if err := w.execAllocations(allocDelete, "deleting", b.ID, held, end); err != nil {
			return false, err
		}
	default: // live again, over its whole range (a move before it was
		// cancelled is not remembered: the range of its placements
		// before the move, past by then, counts as held again)
		if err := w.insertAllocations(b.ID, start, newEnd, b.Placements); err != nil {
			return false, err
		}
	}
	// Allocations of a block that is not live hold nothing and need no
	// check; a live block's need one when they moved, their range changed
	// or they came back to life.
	return live, nil
}

// insertJournal stores a journal and its postings; its Seq goes to
// w.journalSeqs.
func (w *commitTx) insertJournal(j core.Journal) error {
	res, err := w.stmt(w.ws.insertJournal).ExecContext(w.ctx,
		j.ID, unixSeconds(j.Time), j.Kind, j.Subject, j.InstanceType, j.Currency)
	if isConstraint(err) {
		return fmt.Errorf("inserting journal %s: it already exists: %w", j.ID, store.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("inserting journal %s: %w", j.ID, err)
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("reading the seq of journal %s: %w", j.ID, err)
	}
	w.journalSeqs = append(w.journalSeqs, seq)
	for n, p := range j.Postings {
		if _, err := w.stmt(w.ws.insertPosting).ExecContext(w.ctx,
			j.ID, n, p.Account, p.Team, p.Kind, unixSeconds(j.Time), p.Amount, p.OnDemand, p.Subject); err != nil {
			return fmt.Errorf("inserting posting %d of journal %s: %w", n, j.ID, err)
		}
	}
	return nil
}

func (w *commitTx) insertEvent(e core.Event, data string) (int64, error) {
	res, err := w.stmt(w.ws.insertEvent).ExecContext(w.ctx,
		e.ID, unixSeconds(e.Time), e.Type, e.Subject, e.Team, data)
	if err != nil {
		return 0, fmt.Errorf("inserting event %s: %w", e.ID, err)
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("reading seq of event %s: %w", e.ID, err)
	}
	return seq, nil
}
