package simulate

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"capblock/internal/core"
	"capblock/internal/store"
)

// checker holds what was read of the store: the events and journals up
// to the last read, and each block as last read. After each step it
// reads what the step committed (the events and journals after the last
// it read) and the blocks they name, so that a step costs what it
// changed; every FullCheckEvery steps, after a crash and at the end it
// reads every block, which finds a change that no event tells of.
type checker struct {
	lastEvent int64
	// evState is each block's state as its events tell it; evCreated
	// the blocks with an event that made them (bought, received).
	evState   map[string]core.BlockState
	evCreated map[string]bool
	// evPurchased are the blocks a purchase made (block.purchased).
	evPurchased map[string]bool
	// evNow are the blocks the events of this step were about: a block
	// whose version moved has one.
	evNow  map[string]bool
	stored map[string]core.Block
	// placedFrom is, for each block, when it took the GPUs it holds: its
	// start, or the step that moved it while it ran (the hours before
	// were held on the GPUs it left, and are not held twice).
	placedFrom map[string]time.Time
	alloc      allocations
	led        *ledger
	ord        *orderLog
	jobs       *jobWorld
	// touched are the blocks to read after this step.
	touched    map[string]bool
	afterCrash bool
	// events and journals are how many commits the store had been
	// asked for with events, and with journals, at the last read: when
	// no more were, there is nothing new to read.
	events, journals int
	// expect are checks of the step's answers that need what the step
	// stored, read: they run once the step's reads are done.
	expect []func()
}

func newChecker() *checker {
	return &checker{
		evState: map[string]core.BlockState{}, evCreated: map[string]bool{}, evPurchased: map[string]bool{}, evNow: map[string]bool{},
		stored: map[string]core.Block{}, placedFrom: map[string]time.Time{}, alloc: allocations{}, led: newLedger(), ord: newOrderLog(),
		touched: map[string]bool{},
	}
}

// touch makes the checker read block id after this step.
func (c *checker) touch(id string) { c.touched[id] = true }

// event takes in one event.
func (c *checker) event(e core.Event) {
	if isOrderID(e.Subject) {
		c.ord.event(e)
		return
	}
	if isJobID(e.Subject) {
		c.jobs.event(e)
		return
	}
	if !isBlockID(e.Subject) {
		return // a plan's, a series', a job's
	}
	c.touched[e.Subject] = true
	c.evNow[e.Subject] = true
	switch e.Type {
	case core.EventBlockPurchased:
		c.evCreated[e.Subject], c.evPurchased[e.Subject] = true, true
	case core.EventBlockReceived:
		c.evCreated[e.Subject] = true
	}
	if to, ok := e.Data["to"].(string); ok {
		c.evState[e.Subject] = core.BlockState(to)
	}
}

// check reads what the step stored and checks it.
func (w *world) check() {
	c := w.chk
	// 1. What the step's commits stored: events and journals.
	if ev, jr := w.fs.written(); ev != c.events || jr != c.journals {
		w.readCommitted(ev != c.events, jr != c.journals)
		c.events, c.journals = ev, jr
	}
	// 2. The blocks the step named or changed.
	if len(c.touched) > 0 {
		ids := slices.Sorted(maps.Keys(c.touched))
		clear(c.touched)
		blocks := make([]core.Block, 0, len(ids))
		for _, id := range ids {
			b, err := w.st.GetBlock(w.ctx, id)
			if errors.Is(err, store.ErrNotFound) {
				if r := w.m.blocks[id]; r != nil && r.acked.ID != "" {
					w.fail("block %s, acknowledged (%s), is not stored", id, r.acked.State)
				}
				w.fail("block %s, named by an event or journal, is not stored", id)
			}
			if err != nil {
				w.fail("reading block %s: %v", id, err)
			}
			blocks = append(blocks, b)
		}
		w.takeBlocks(blocks)
	}
	// 3. The orders the step named or changed, once the blocks they
	//    bought are read.
	if len(c.ord.touched) > 0 {
		w.takeOrders()
	}
	// 4. The step's own expectations, now that what it stored is read.
	for _, f := range c.expect {
		f()
	}
	c.expect = c.expect[:0]
	clear(c.evNow)
	if s := w.engine.staleWrite(); s != "" {
		w.fail("a stale engine write: %s", s)
	}
	if s := w.engine.tightDeadline(); s != "" {
		w.fail("an engine call under a short wall-clock deadline, which a busy machine passes, so that the seed does not replay: %s", s)
	}
	w.checkFences()
	w.checkJobs()
	if c.afterCrash || w.step%w.cfg.FullCheckEvery == 0 {
		c.afterCrash = false
		w.checkAll()
	}
}

// readCommitted reads the events and the journals committed since the
// last read: the events in order, each block's state as they tell it;
// the journals checked as they come. The blocks they name are read
// next.
func (w *world) readCommitted(events, journals bool) {
	c := w.chk
	if events {
		w.readEvents()
	}
	if !journals {
		return
	}
	js, err := w.st.Journals(w.ctx, store.JournalFilter{After: c.led.lastSeq})
	if err != nil {
		w.fail("reading the journals: %v", err)
	}
	if err := c.led.add(js); err != nil {
		w.fail("the ledger: %v", err)
	}
	for id := range c.led.touched {
		c.touched[id] = true
	}
	clear(c.led.touched)
}

// readEvents reads the events after the last read.
func (w *world) readEvents() {
	c := w.chk
	evs, err := w.st.Events(w.ctx, "", c.lastEvent, 0)
	if err != nil {
		w.fail("reading the events: %v", err)
	}
	for _, e := range evs {
		if e.Seq <= c.lastEvent {
			w.fail("event %d (%s about %s) comes after event %d", e.Seq, e.Type, e.Subject, c.lastEvent)
		}
		c.lastEvent = e.Seq
		c.event(e)
		if w.cfg.Trace != nil {
			w.cfg.Trace(fmt.Sprintf("    event %d %s %s %v", e.Seq, e.Type, e.Subject, e.Data))
		}
	}
}

// takeBlocks checks blocks just read against their events, what was
// acknowledged of them and every other live block's GPUs, and keeps
// them as the last read.
func (w *world) takeBlocks(blocks []core.Block) {
	c := w.chk
	for _, b := range blocks {
		if !c.evCreated[b.ID] {
			w.fail("block %s (%s, team %s) has no event that made it (block.purchased or block.received)", b.ID, b.State, w.teamName(b.Team))
		}
		if st := c.evState[b.ID]; st != b.State {
			w.fail("block %s is %s in the store; its events say %s", b.ID, b.State, st)
		}
		if old, ok := c.stored[b.ID]; ok && old.Version != b.Version && !c.evNow[b.ID] {
			w.fail("block %s changed from version %d (%s until %s) to version %d (%s until %s) with no event",
				b.ID, old.Version, old.State, old.End.Format(time.RFC3339), b.Version, b.State, b.End.Format(time.RFC3339))
		}
		if r := w.m.blocks[b.ID]; r != nil {
			w.checkAcked(r, b)
		}
		// Bought once, charged once, and charged its fee: what the
		// quote said, plus what each extension's quote said.
		if c.evPurchased[b.ID] {
			if n := c.led.purchases[b.ID]; n != 1 {
				w.fail("block %s was bought once and charged by %d purchase journals", b.ID, n)
			}
			if got := c.led.charged[b.ID]; got != b.Fee.Minor {
				w.fail("block %s's fee is %d; its purchase and extensions charged %d", b.ID, b.Fee.Minor, got)
			}
		}
	}
	// The GPUs: every block's old hold goes before any new one is taken,
	// since one step may move a block onto GPUs another left.
	for _, b := range blocks {
		if old, ok := c.stored[b.ID]; ok {
			c.alloc.drop(old)
		}
	}
	now := w.now()
	for _, b := range blocks {
		old, ok := c.stored[b.ID]
		if ok && !samePlacements(old.Placements, b.Placements) && now.After(b.Start) {
			c.placedFrom[b.ID] = now
		}
		if err := c.alloc.take(b, c.placedFrom[b.ID]); err != nil {
			w.fail("double booking: %v", err)
		}
		c.stored[b.ID] = b
		w.m.observe(b)
	}
}

// checkAcked checks that the store holds what was acknowledged of a
// block, or a later version of it.
func (w *world) checkAcked(r *blockRec, b core.Block) {
	a := r.acked
	switch {
	case a.ID == "":
		return // known from the store only
	case b.Version < a.Version:
		w.fail("block %s is stored at version %d, older than version %d acknowledged (%s)", b.ID, b.Version, a.Version, a.State)
	case b.Version == a.Version && (b.State != a.State || !b.End.Equal(a.End) || b.Fee != a.Fee || b.Team != a.Team || b.Count != a.Count ||
		b.Lending != a.Lending):
		w.fail("block %s at version %d is stored as %s until %s with a fee of %d, lending %v; it was acknowledged as %s until %s with a fee of %d, lending %v",
			b.ID, b.Version, b.State, b.End.Format(time.RFC3339), b.Fee.Minor, b.Lending, a.State, a.End.Format(time.RFC3339), a.Fee.Minor, a.Lending)
	case r.cancelled && b.State != core.StateCancelled:
		w.fail("block %s was acknowledged cancelled; the store says %s", b.ID, b.State)
	case !a.State.Live() && b.State != a.State:
		w.fail("block %s was acknowledged %s, which it never leaves; the store says %s", b.ID, a.State, b.State)
	}
}

// checkAll reads every block: each must be as last read (a change with
// no event is not), each acknowledged one stored, and no GPU in two live
// blocks at once, counted again from nothing.
func (w *world) checkAll() {
	c := w.chk
	all, err := w.st.ListBlocks(w.ctx, store.BlockFilter{})
	if err != nil {
		w.fail("listing the blocks: %v", err)
	}
	fresh := allocations{}
	seen := make(map[string]bool, len(all))
	for _, b := range all {
		seen[b.ID] = true
		old, ok := c.stored[b.ID]
		switch {
		case !ok:
			w.fail("block %s (%s, team %s) is stored, yet no event names it", b.ID, b.State, w.teamName(b.Team))
		case old.Version != b.Version || old.State != b.State || !old.End.Equal(b.End) || !samePlacements(old.Placements, b.Placements):
			w.fail("block %s changed from version %d (%s until %s on %v) to version %d (%s until %s on %v) with no event",
				b.ID, old.Version, old.State, old.End.Format(time.RFC3339), old.Placements, b.Version, b.State, b.End.Format(time.RFC3339), b.Placements)
		}
		if r := w.m.blocks[b.ID]; r != nil {
			w.checkAcked(r, b)
		}
		if err := fresh.take(b, c.placedFrom[b.ID]); err != nil {
			w.fail("double booking: %v", err)
		}
	}
	w.checkHeld(all)
	w.checkSeriesStored()
	w.checkOrdersStored()
	w.checkAccountsStored()
	for _, id := range slices.Sorted(maps.Keys(w.m.blocks)) {
		if r := w.m.blocks[id]; r.acked.ID != "" && !seen[id] {
			w.fail("block %s, acknowledged (%s), is not stored", id, r.acked.State)
		}
	}
	// The stored health of each node is what its last acknowledged fail
	// or recover left.
	recs, err := w.st.NodeHealth(w.ctx)
	if err != nil {
		w.fail("reading the node health: %v", err)
	}
	stored := map[string]core.NodeHealth{}
	for _, h := range recs {
		stored[h.Node] = h
	}
	for _, n := range slices.Sorted(maps.Keys(w.m.health)) {
		if w.m.pendingNode(n) {
			continue
		}
		got := stored[n].Health
		if got == "" {
			got = core.Healthy
		}
		if want := w.m.health[n]; got != want && !engineSays(stored[n], want) {
			w.fail("node %s is stored %s; the last acknowledged change made it %s", n, got, want)
		}
	}
}

// checkHeld checks that no team with a quota of instances held at once
// holds more in its live blocks, at any hour.
func (w *world) checkHeld(all []core.Block) {
	for _, t := range w.teams {
		if t.maxHeld == 0 {
			continue
		}
		type edge struct {
			at    time.Time
			delta int
		}
		var edges []edge
		for _, b := range all {
			if b.Team == t.id && b.State.Live() {
				edges = append(edges, edge{b.Start, b.Count}, edge{b.End, -b.Count})
			}
		}
		slices.SortFunc(edges, func(x, y edge) int {
			if c := x.at.Compare(y.at); c != 0 {
				return c
			}
			return x.delta - y.delta // an end before a start at the same hour
		})
		held := 0
		for _, e := range edges {
			if held += e.delta; held > t.maxHeld {
				w.fail("team %s holds %d instances at %s in its live blocks; its quota is %d", t.name, held, e.at.Format(time.RFC3339), t.maxHeld)
			}
		}
	}
}

func samePlacements(a, b []core.Placement) bool {
	return slices.EqualFunc(a, b, func(x, y core.Placement) bool { return x.Node == y.Node && slices.Equal(x.GPUs, y.GPUs) })
}

// checkFinal checks the world once it is quiet: nothing pending on the
// engine, no lifecycle step overdue, and the engine holding exactly the
// store's active blocks (DESIGN.md, invariant 11).
func (w *world) checkFinal() {
	w.checkAll()
	pending, failed, err := w.st.ActionCounts(w.ctx)
	if err != nil {
		w.fail("counting the engine actions: %v", err)
	}
	if pending > 0 || failed > 0 {
		w.fail("after quiescence %d engine actions are pending and %d failed", pending, failed)
	}
	now := w.now()
	limits := w.fleet.Limits
	held := w.engine.held()
	active := map[string]bool{}
	for _, id := range slices.Sorted(maps.Keys(w.chk.stored)) {
		b := w.chk.stored[id]
		if due, ok := core.NextDue(b, limits); ok && !due.After(now) {
			w.fail("block %s is %s at %s: its step due at %s was never taken", b.ID, b.State, now.Format(time.RFC3339), due.Format(time.RFC3339))
		}
		if b.State != core.StateActive {
			continue
		}
		active[b.ID] = true
		want := "active"
		if b.Terminating {
			want = "terminating"
		}
		if got := held[b.ID]; got != want {
			w.fail("block %s is active (terminating: %v) in the store; the engine holds it as %q", b.ID, b.Terminating, got)
		}
		// The GPUs the engine made usable are the block's, as stored
		// (a replacement's, after a node failed).
		if last, ok := w.engine.lastWrite(b.ID); !ok || last.kind == core.ActionActivate && !samePlacements(last.placements, b.Placements) {
			w.fail("block %s holds %v in the store; the engine's last activation of it (version %d) made %v usable",
				b.ID, b.Placements, last.version, last.placements)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(held)) {
		if !active[id] {
			w.fail("the engine holds block %s (%s); the store has it %s", id, held[id], w.chk.stored[id].State)
		}
	}
	if n := len(w.m.pending); n > 0 {
		w.fail("%d operations never learnt their outcome, the first a %s", n, w.m.pending[0].kind)
	}
	if n := len(w.m.waiting); n > 0 {
		w.fail("%d series purchases never learnt their outcome", n)
	}
}

func (w *world) teamName(id string) string {
	for _, t := range w.teams {
		if t.id == id {
			return t.name
		}
	}
	return id
}

// allocations are the live blocks' holds on each GPU.
type allocations map[gpuKey][]hold

type gpuKey struct {
	node string
	gpu  int
}

type hold struct {
	block      string
	start, end time.Time
}

// take adds a live block's GPUs over its window from when it took them
// (from, when after its start); one already held by another live block
// over an hour of it is an error.
func (a allocations) take(b core.Block, from time.Time) error {
	if !b.State.Live() {
		return nil
	}
	start := b.Start
	if from.After(start) {
		start = from
	}
	for _, pl := range b.Placements {
		for _, g := range pl.GPUs {
			k := gpuKey{pl.Node, g}
			for _, h := range a[k] {
				if h.block != b.ID && h.start.Before(b.End) && start.Before(h.end) {
					return fmt.Errorf("GPU %d of node %s is in live block %s over [%s, %s) and in live block %s over [%s, %s)",
						g, pl.Node, h.block, h.start.Format(time.RFC3339), h.end.Format(time.RFC3339),
						b.ID, start.Format(time.RFC3339), b.End.Format(time.RFC3339))
				}
			}
			a[k] = append(a[k], hold{b.ID, start, b.End})
		}
	}
	return nil
}

// drop removes what take added for b.
func (a allocations) drop(b core.Block) {
	if !b.State.Live() {
		return
	}
	for _, pl := range b.Placements {
		for _, g := range pl.GPUs {
			k := gpuKey{pl.Node, g}
			a[k] = slices.DeleteFunc(a[k], func(h hold) bool { return h.block == b.ID })
		}
	}
}
