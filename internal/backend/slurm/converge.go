package slurm

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"capblock/internal/backend"
	"capblock/internal/core"
)

// heldKeep is how long the convergence keeps the version this process
// noted of a reservation that is gone and whose block is not live: the
// version a release leaves, that refuses this process's own late
// writes of the block for that long.
const heldKeep = time.Hour

var _ backend.Converger = (*Backend)(nil)

// converger is the convergence's state shared with Converge and Close.
type converger struct {
	mu      sync.Mutex
	desired *backend.Desired
	stop    context.CancelFunc // stops the running loop; nil while none runs
	closed  bool               // Close was called: no loop starts again
	loops   sync.WaitGroup     // the loops running, stopped or not
}

// Converge replaces the desired state that the backend repairs Slurm's
// reservations toward, and starts the loop that does so, if it is not
// running: a pass at once, then one every Config.ConvergePoll. nil stops
// the loop: the pass in progress is cancelled (its commands fail) and no
// other starts; the backend also forgets the reservations it remembers
// writing (updateRemembered), since this replica no longer leads and
// another may write them, so that any later write of it reads first and
// is fenced by the version Slurm records. It returns at once.
func (b *Backend) Converge(d *backend.Desired) {
	if d == nil {
		b.stopConverging(false)
		return
	}
	b.conv.mu.Lock()
	defer b.conv.mu.Unlock()
	b.conv.desired = d
	if b.conv.stop != nil || b.conv.closed {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.conv.stop = cancel
	b.conv.loops.Go(func() { b.convergeLoop(ctx) })
	b.log.Info("converging Slurm's reservations on the desired state", "epoch", d.Epoch, "blocks", len(d.Blocks),
		"poll", b.cfg.ConvergePoll)
}

// stopConverging stops the loop, if one runs; for Close (closing), for
// good, after its pass in progress has ended.
func (b *Backend) stopConverging(closing bool) {
	b.conv.mu.Lock()
	running := b.conv.stop != nil
	if running {
		b.conv.stop()
		b.conv.stop = nil
	}
	b.conv.desired = nil
	b.conv.closed = b.conv.closed || closing
	b.conv.mu.Unlock()
	b.mu.Lock()
	clear(b.wrote)
	b.mu.Unlock()
	if running {
		b.log.Info("stopped converging Slurm's reservations")
	}
	if closing {
		b.conv.loops.Wait()
	}
}

// desiredNow is the desired state the next pass compares with; nil once
// stopped.
func (b *Backend) desiredNow() *backend.Desired {
	b.conv.mu.Lock()
	defer b.conv.mu.Unlock()
	return b.conv.desired
}

// convergeLoop runs a pass at once, then one every ConvergePoll, until
// ctx ends.
func (b *Backend) convergeLoop(ctx context.Context) {
	st := newPassState()
	tick := time.NewTicker(b.cfg.ConvergePoll)
	defer tick.Stop()
	for {
		if d := b.desiredNow(); d != nil && ctx.Err() == nil {
			err := b.convergeOnce(ctx, d, st)
			// Counted under the lock with which Converge(nil) stops the
			// loop: once it has returned, no pass counts.
			b.conv.mu.Lock()
			if ctx.Err() == nil {
				st.report(b, "", err)
				b.polls.Add(1)
			}
			b.conv.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// passState is what one loop keeps from pass to pass.
type passState struct {
	// unknown is when a pass first found each reservation of capblock's
	// whose block the desired state does not name (backend.UnknownGrace).
	unknown map[string]time.Time
	// failing is each block's last repair error, as logged: a repair that
	// fails again for the same reason is not logged again.
	failing map[string]string
}

func newPassState() *passState {
	return &passState{unknown: map[string]time.Time{}, failing: map[string]string{}}
}

// report logs a repair's failure, unless it failed so at the last pass;
// a nil err clears it.
func (st *passState) report(b *Backend, name string, err error) {
	if err == nil {
		delete(st.failing, name)
		return
	}
	if st.failing[name] == err.Error() {
		return
	}
	st.failing[name] = err.Error()
	if name == "" {
		b.log.Warn("converging Slurm's reservations", "err", err)
		return
	}
	b.log.Warn("repairing a block's Slurm reservation", "block", name, "err", err)
}

// convergeOnce is one pass: it compares Slurm's reservations with d and
// repairs what differs.
func (b *Backend) convergeOnce(ctx context.Context, d *backend.Desired, st *passState) error {
	// 1. Every reservation, in one command.
	have, err := b.listReservations(ctx)
	if err != nil {
		return err
	}
	now := b.cfg.Now()
	b.notice(have)
	// 2. The desired state: the live blocks, and those a decision in
	// flight changes, left alone.
	live := make(map[string]bool, len(d.Blocks))
	for _, blk := range d.Blocks {
		live[blk.ID] = true
	}
	unsettled := make(map[string]bool, len(d.Unsettled))
	for _, id := range d.Unsettled {
		unsettled[id] = true
	}
	// 3. Each live block's reservation, as the block wants it.
	for _, blk := range d.Blocks {
		if unsettled[blk.ID] || ctx.Err() != nil {
			continue
		}
		res, found := have[blk.ID]
		st.report(b, blk.ID, b.convergeBlock(ctx, blk, res, found, now))
	}
	// 4. The reservations of capblock's whose block is not live; never
	// another's (its name is not a block's).
	for name, res := range have {
		if !strings.HasPrefix(name, blockIDPrefix) || live[name] || unsettled[name] || ctx.Err() != nil {
			delete(st.unknown, name)
			continue
		}
		st.report(b, name, b.convergeUnknown(ctx, res, now, st))
	}
	// 5. What is gone: its pass state, and after heldKeep, its version.
	for name := range st.unknown {
		if _, ok := have[name]; !ok {
			delete(st.unknown, name)
		}
	}
	b.mu.Lock()
	for name, h := range b.held {
		if _, ok := have[name]; !ok && !live[name] && !unsettled[name] && now.Sub(h.at) >= heldKeep {
			delete(b.held, name)
		}
	}
	b.mu.Unlock()
	return nil
}

// notice takes in what a pass read of capblock's reservations: the
// versions they record are noted (a write older than those is then
// refused in this process at once), and a reservation that is not as
// this process remembers writing it is forgotten, so that its next
// write reads it first. That is how the fast path of Reserve
// (updateRemembered), which writes without reading, learns within a
// poll that another process wrote the reservation since.
func (b *Backend) notice(have map[string]reservation) {
	for name, res := range have {
		if !strings.HasPrefix(name, blockIDPrefix) {
			continue
		}
		if res.versioned {
			b.hold(name, res.version)
		}
		if last, ok := b.remembered(name); ok && (!slices.Equal(last.nodes, res.nodes) || !last.end.Equal(res.end) ||
			res.versioned && last.version != res.version) {
			b.forget(name)
		}
	}
}

// convergeBlock repairs the reservation of live block blk, which the
// pass read as have (found: it exists). A block whose end has passed
// holds nothing (Release follows). A version older than the one the
// engine holds is the desired state lagging behind an action applied
// since: left for the next pass, quietly, since it is expected (the
// leader's index follows the store's commits a moment later).
func (b *Backend) convergeBlock(ctx context.Context, blk core.Block, have reservation, found bool, now time.Time) error {
	want, err := b.want(ctx, blk)
	if err != nil {
		return err
	}
	if !want.end.After(now) {
		return nil
	}
	stale := b.checkHeld(blk)
	if found && stale == nil {
		stale = checkRecorded(have, want)
	}
	if stale != nil {
		b.log.Debug("the desired state of a block is older than its reservation; left for a later pass", "block", blk.ID, "err", stale)
		return nil
	}
	var diff []string
	if found {
		if diff = updateArgs(have, want, now); len(diff) == 0 {
			return nil
		}
	}
	// An action that holds the lock is writing the reservation now: the
	// next pass looks again.
	lock := b.locks.of(blk.ID)
	if !lock.TryLock() {
		return nil
	}
	defer lock.Unlock()
	if ctx.Err() != nil {
		return nil
	}
	if found {
		b.log.Info("repairing a block's Slurm reservation that differs from the block", "block", blk.ID, "version", blk.Version,
			"changes", strings.Join(diff, " "))
	} else {
		b.log.Info("repairing a block's Slurm reservation that is missing", "block", blk.ID, "version", blk.Version)
	}
	// Read again under the lock, then write: the fence checks the
	// version as Slurm holds it now.
	return b.fenced("converge", blk, b.activate(ctx, blk))
}

// convergeUnknown deletes the reservation res of capblock's, whose
// block the desired state does not name: at once when capblock recorded
// no version in it (it did not write it so), else once it has stayed
// unknown for backend.UnknownGrace. Slurm refuses to delete a
// reservation in which jobs run; the convergence leaves them be (the
// block's Release cancels its jobs, on a block the store has settled,
// not on a desired state that may lag) and tries again at each pass.
func (b *Backend) convergeUnknown(ctx context.Context, res reservation, now time.Time, st *passState) error {
	since, seen := st.unknown[res.name]
	if !seen {
		since = now
		st.unknown[res.name] = now
	}
	grace := backend.UnknownGrace
	if b.versionsInSlurm && !res.versioned {
		grace = 0
	}
	if now.Sub(since) < grace {
		return nil
	}
	lock := b.locks.of(res.name)
	if !lock.TryLock() {
		return nil
	}
	defer lock.Unlock()
	if ctx.Err() != nil {
		return nil
	}
	_, err := b.scontrol(ctx, "delete", "ReservationName="+res.name)
	switch {
	case err == nil:
		b.log.Info("deleted the Slurm reservation of a block that is not live", "block", res.name, "version", res.version,
			"versioned", res.versioned, "unknownSince", since)
	case slurmSays(err, "Requested reservation is invalid"), slurmSays(err, "not found"):
	default:
		return fmt.Errorf("deleting the reservation of a block that is not live: %w", err)
	}
	b.setKnown(res.name, false)
	b.forget(res.name)
	delete(st.unknown, res.name)
	return nil
}

// listReservations reads every reservation of the cluster, by name. One
// that does not parse is left out when it is not capblock's, and fails
// the read when it is: a pass must not take a block's reservation that
// it cannot read for a missing one.
func (b *Backend) listReservations(ctx context.Context) (map[string]reservation, error) {
	out, err := b.scontrol(ctx, "show", "reservation")
	if slurmSays(err, "No reservations in the system") {
		return map[string]reservation{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Slurm's reservations: %w", err)
	}
	all := map[string]reservation{}
	for _, r := range parseRecords(out) {
		name := r["ReservationName"]
		if name == "" {
			continue
		}
		res, err := parseReservation(r)
		if err != nil {
			if strings.HasPrefix(name, blockIDPrefix) {
				return nil, fmt.Errorf("reading Slurm's reservations: %w", err)
			}
			continue
		}
		all[name] = res
	}
	return all, nil
}
