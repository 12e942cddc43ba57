package simulate_test

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/cryptotest"

	"capblock/internal/backend"
	"capblock/internal/backend/local"
	"capblock/internal/core"
	"capblock/internal/simulate"
	"capblock/internal/store"
)

// Mutants: stores with a defect planted, each in the commits of one kind
// from the third on (from the first, for the rarer series and orders).
// The simulation must find each within mutantSeeds
// seeds of mutantOps steps, and say what is wrong: a check that no defect
// can fail checks nothing.

const mutantSeeds = 3

// mutantOps are the steps of each seed: fewer under the race detector,
// and still enough for each mutant on the first seed.
func mutantOps() int {
	if raceOn || testing.Short() {
		return 300
	}
	return 1500
}

// mutant passes every call on to the real store but Commit, which it
// hands to commit with the number of the call among those that match.
type mutant struct {
	store.Full
	match  func(store.Change) bool
	commit func(ctx context.Context, full store.Full, c store.Change, n int) error
	n      int
}

func (m *mutant) Commit(ctx context.Context, c store.Change) error {
	if !m.match(c) {
		return m.Full.Commit(ctx, c)
	}
	m.n++
	return m.commit(ctx, m.Full, c, m.n)
}

// buys matches the commits of block purchases.
func buys(c store.Change) bool {
	for _, j := range c.Journals {
		if j.Kind == core.JournalPurchase && len(c.Insert) > 0 {
			return true
		}
	}
	return false
}

// cancels matches the commits that cancel a block (a client's).
func cancels(c store.Change) bool {
	for _, e := range c.Events {
		if e.Type == core.EventBlockCancelled {
			return true
		}
	}
	return false
}

// series matches the commits of series purchases.
func series(c store.Change) bool { return len(c.InsertSeries) > 0 }

// orderBuys matches the commits of the blocks that standing orders buy.
func orderBuys(c store.Change) bool { return len(c.UpdateOrders) > 0 && len(c.Insert) > 0 }

// activations matches the commits of the reconciler that start blocks.
func activations(c store.Change) bool {
	for _, e := range c.Events {
		if e.Type == core.EventBlockActive {
			return true
		}
	}
	return false
}

var mutants = []struct {
	name string
	// match and commit make the mutant (see mutant); from the third
	// matching commit on is the defect's.
	match  func(store.Change) bool
	commit func(ctx context.Context, full store.Full, c store.Change, n int) error
	// want matches the failure's message.
	want string
}{
	{
		name:  "a purchase charges nothing",
		match: buys,
		commit: func(ctx context.Context, full store.Full, c store.Change, n int) error {
			if n >= 3 {
				c.Journals = nil
			}
			return full.Commit(ctx, c)
		},
		want: "charged by 0 purchase journals",
	},
	{
		name:  "a purchase whose commit failed is acknowledged",
		match: buys,
		commit: func(ctx context.Context, full store.Full, c store.Change, n int) error {
			if n >= 3 {
				return nil
			}
			return full.Commit(ctx, c)
		},
		want: "is not stored",
	},
	{
		name:  "a block is stored at another fee than quoted",
		match: buys,
		commit: func(ctx context.Context, full store.Full, c store.Change, n int) error {
			if n >= 3 {
				c.Insert = append([]core.Block(nil), c.Insert...)
				c.Insert[0].Fee.Minor++
			}
			return full.Commit(ctx, c)
		},
		want: "fee",
	},
	{
		name:  "a cancellation is acknowledged but not stored",
		match: cancels,
		commit: func(ctx context.Context, full store.Full, c store.Change, n int) error {
			if n >= 3 {
				return nil
			}
			return full.Commit(ctx, c)
		},
		want: "cancelled is|cancelled, yet",
	},
	{
		name:  "a block becomes active without its event",
		match: activations,
		commit: func(ctx context.Context, full store.Full, c store.Change, n int) error {
			if n >= 3 {
				var kept []core.Event
				for _, e := range c.Events {
					if e.Type != core.EventBlockActive {
						kept = append(kept, e)
					}
				}
				c.Events = kept
			}
			return full.Commit(ctx, c)
		},
		// Read after a later event of the block's, or by a full check
		// (after a restart) first.
		want: `its events say scheduled|\(active until .* with no event`,
	},
	{
		name:  "a refund pays back more than was paid",
		match: cancels,
		commit: func(ctx context.Context, full store.Full, c store.Change, n int) error {
			if n >= 3 {
				c.Journals = append([]core.Journal(nil), c.Journals...)
				for i, j := range c.Journals {
					j.Postings = append([]core.Posting(nil), j.Postings...)
					for k := range j.Postings {
						j.Postings[k].Amount *= 3 // still balanced
					}
					c.Journals[i] = j
				}
			}
			return full.Commit(ctx, c)
		},
		want: "back for block|escrow .* below zero",
	},
	{
		name:  "a series occurrence is stored at another fee than quoted",
		match: series,
		commit: func(ctx context.Context, full store.Full, c store.Change, n int) error {
			c.Insert = append([]core.Block(nil), c.Insert...)
			c.Insert[len(c.Insert)-1].Fee.Minor++
			return full.Commit(ctx, c)
		},
		want: "fee",
	},
	{
		name:  "a standing order buys its block at another fee than the offering's",
		match: orderBuys,
		commit: func(ctx context.Context, full store.Full, c store.Change, n int) error {
			c.Insert = append([]core.Block(nil), c.Insert...)
			c.Insert[0].Fee.Minor += 100
			c.Journals = append([]core.Journal(nil), c.Journals...)
			for i, j := range c.Journals {
				if j.Kind != core.JournalPurchase {
					continue
				}
				// Charged as stored: the charge and the escrow's share,
				// still balanced.
				j.Postings = append([]core.Posting(nil), j.Postings...)
				j.Postings[0].Amount -= 100
				j.Postings[1].Amount += 100
				c.Journals[i] = j
			}
			return full.Commit(ctx, c)
		},
		want: "the offering that served it said",
	},
}

// forgetfulEngine says it released a block's GPUs, from its third
// release on, without releasing them.
type forgetfulEngine struct {
	backend.Backend
	n int
}

func (e *forgetfulEngine) Release(ctx context.Context, b core.Block) error {
	if e.n++; e.n >= 3 {
		return nil
	}
	return e.Backend.Release(ctx, b)
}

// TestMutantEngine runs the simulation on an engine that forgets its
// releases: convergence must find a block it holds that the store has
// ended.
func TestMutantEngine(t *testing.T) {
	huntMutant(t, simulate.Config{Ops: mutantOps(), Dir: memDir(t), Faults: testFaults(),
		MutantEngine: func(b backend.Backend) backend.Backend { return &forgetfulEngine{Backend: b} }},
		regexp.QuoteMeta("the engine holds block"))
}

// TestMutants runs the simulation on each mutant: it must fail within
// mutantSeeds seeds, naming the defect.
func TestMutants(t *testing.T) {
	dir := memDir(t)
	for _, mu := range mutants {
		t.Run(mu.name, func(t *testing.T) {
			huntMutant(t, simulate.Config{Ops: mutantOps(), Dir: dir, Faults: testFaults(),
				Mutant: func(full store.Full) store.Full { return &mutant{Full: full, match: mu.match, commit: mu.commit} }}, mu.want)
		})
	}
}

// huntMutant runs seeds 1 to mutantSeeds of cfg one after another (its
// Seed set to each) and fails t unless one of them fails, on a message
// that want (a regular expression) matches.
func huntMutant(t *testing.T, cfg simulate.Config, want string) {
	t.Helper()
	for seed := uint64(1); seed <= mutantSeeds; seed++ {
		cryptotest.SetGlobalRandom(t, seed)
		cfg.Seed = seed
		_, err := simulate.Run(t.Context(), cfg)
		if err == nil {
			continue
		}
		if !regexp.MustCompile(want).MatchString(err.Error()) {
			t.Fatalf("seed %d failed, but not on the defect (want %q in the message): %v", seed, want, err)
		}
		t.Logf("seed %d found it: %s", seed, firstLine(err.Error()))
		return
	}
	t.Errorf("%d seeds of %d steps never found the defect", mutantSeeds, cfg.Ops)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// unfencedSim is an engine without a version fence: it takes every
// write, a late one of an older version of a block too. Only calls that
// reach it out of order (a call that hung, a deposed leader's) show it.
type unfencedSim struct {
	backend.Backend // the sim, for its name and inventory

	mu   sync.Mutex
	held map[string]string
	last map[string]unfencedWrite
}

type unfencedWrite struct {
	kind    core.ActionKind
	version int64
}

func newUnfencedSim(nodes []core.Node) simulate.Engine {
	return &unfencedSim{Backend: local.NewSim(slog.New(slog.DiscardHandler), nodes), held: map[string]string{}, last: map[string]unfencedWrite{}}
}

func (s *unfencedSim) take(kind core.ActionKind, b core.Block, state string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if state == "" {
		delete(s.held, b.ID)
	} else {
		s.held[b.ID] = state
	}
	s.last[b.ID] = unfencedWrite{kind, b.Version}
	return nil
}

func (s *unfencedSim) Activate(_ context.Context, b core.Block) error {
	return s.take(core.ActionActivate, b, "active")
}

func (s *unfencedSim) Terminate(_ context.Context, b core.Block) error {
	return s.take(core.ActionTerminate, b, "terminating")
}

func (s *unfencedSim) Release(_ context.Context, b core.Block) error {
	return s.take(core.ActionRelease, b, "")
}

func (s *unfencedSim) State(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[id]
}

func (s *unfencedSim) LastWrite(id string) (core.ActionKind, int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.last[id]
	return w.kind, w.version, ok
}

// stickyLease is a store whose leader's lease, once taken, never lapses
// for its holder: a release (an expiry, in the simulation) leaves it
// current, so that a server taking the lead under the same name goes on
// with its epoch, and a deposed leader's records are taken.
type stickyLease struct{ store.Full }

func (stickyLease) ReleaseLease(context.Context, string, int64) error { return nil }

// TestMutantFences runs the simulation on an engine without a version
// fence, and on a store whose lease never lapses: the calls that reach
// the engine out of order, and the leaders deposed while their call
// hangs, must find them. Those faults come more often than by default,
// so that the steps of the race detector's runs are enough.
func TestMutantFences(t *testing.T) {
	tests := map[string]struct {
		cfg  func(*simulate.Config)
		want string
	}{
		"an engine takes a write older than one it took": {
			cfg:  func(c *simulate.Config) { c.MutantSim = newUnfencedSim },
			want: "a stale engine write",
		},
		"a deposed leader's records are taken": {
			cfg:  func(c *simulate.Config) { c.Mutant = func(full store.Full) store.Full { return stickyLease{full} } },
			want: "a deposed leader was not fenced",
		},
	}
	dir := memDir(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := simulate.Config{Ops: mutantOps(), Dir: dir, Faults: testFaults()}
			cfg.Faults.EngineHangs, cfg.Faults.LeaderDeposed = 0.25, 1
			tc.cfg(&cfg)
			huntMutant(t, cfg, regexp.QuoteMeta(tc.want))
		})
	}
}
