package service

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"capblock/internal/backend/local"
	"capblock/internal/clock"
	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

// BenchmarkOutboxSlowSubject: 64 blocks activate at once through an
// engine whose every call takes 5 ms, beside a 65th block whose
// activation hangs for 30 s (the call timeout), or not at all. It
// reports the 99th percentile and the median of the 64 blocks' latency,
// from the commit that stored their activations to the engine's
// answer: with the hang, one worker of the pool is held, and the others
// take every other subject, so the p99 stays within 2x of the run
// without it.
//
//	go test ./internal/service -run XXX -bench OutboxSlowSubject -count 6
func BenchmarkOutboxSlowSubject(b *testing.B) {
	for _, hang := range []time.Duration{0, 30 * time.Second} {
		b.Run(fmt.Sprintf("hang=%v", hang), func(b *testing.B) {
			var all []time.Duration
			for b.Loop() {
				b.StopTimer()
				env := newSlowEngineEnv(b, hang)
				b.StartTimer()
				all = append(all, env.run(b)...)
			}
			slices.Sort(all)
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			b.ReportMetric(ms(all[len(all)/2]), "ms-p50")
			b.ReportMetric(ms(all[len(all)*99/100]), "ms-p99")
		})
	}
}

// slowEngineEnv is a service whose engine answers every call in 5 ms,
// but block cb-hang's activation, which hangs for hang.
type slowEngineEnv struct {
	svc  *Service
	be   *slowEngine
	w    *outboxWorker
	sim  *clock.Sim
	hang time.Duration
}

const slowEngineBlocks = 64

func newSlowEngineEnv(b *testing.B, hang time.Duration) *slowEngineEnv {
	ctx := b.Context()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "slow.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	f := core.Fleet{Currency: "USD", Limits: core.DefaultLimits(), Pricing: core.DefaultPricing(),
		Types: []core.InstanceType{{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: core.Money{Minor: 9832, Currency: "USD"}}}}
	var blocks []core.Block
	for i := range slowEngineBlocks + 1 {
		node := fmt.Sprintf("n%d", i)
		f.Nodes = append(f.Nodes, core.Node{Name: node, Zone: "z", Rack: "r", GPUModel: "H100", GPUs: 8, Health: core.Healthy})
		id := fmt.Sprintf("cb-%02d", i)
		if i == slowEngineBlocks {
			id = "cb-hang"
		}
		blocks = append(blocks, wholeNode(id, node, 2, 10))
	}
	if err := st.Commit(ctx, store.Change{Insert: blocks}); err != nil {
		b.Fatal(err)
	}
	sim := clock.NewSim(planT0)
	be := &slowEngine{Sim: local.NewSim(slog.New(slog.DiscardHandler), f.Nodes), hang: hang, done: map[string]time.Time{}}
	svc, err := New(ctx, Config{Fleet: f, Store: st, Backend: be, Clock: sim, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	l, ok, err := st.AcquireLease(ctx, "bench", time.Hour)
	if err != nil || !ok {
		b.Fatalf("AcquireLease: %+v, ok %v, err %v", l, ok, err)
	}
	return &slowEngineEnv{svc: svc, be: be, w: &outboxWorker{svc: svc, opts: svc.outbox.opts, epoch: l.Epoch}, sim: sim, hang: hang}
}

// run stores the 65 activations (one reconcile at their start) and
// applies them, and returns the 64 others' latencies.
func (e *slowEngineEnv) run(b *testing.B) []time.Duration {
	if _, err := e.sim.Set(planHour(2)); err != nil {
		b.Fatal(err)
	}
	committed := time.Now()
	if err := e.svc.Reconcile(b.Context()); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Context())
	done := make(chan error, 1)
	go func() { done <- e.w.loop(ctx, e.svc.outbox.kick) }()
	out := e.be.wait(b, slowEngineBlocks)
	cancel()
	<-done
	lat := make([]time.Duration, 0, len(out))
	for _, at := range out {
		lat = append(lat, at.Sub(committed))
	}
	return lat
}

// slowEngine is the simulated engine, 5 ms a call, and one call that
// hangs.
type slowEngine struct {
	*local.Sim
	hang time.Duration

	mu     sync.Mutex
	done   map[string]time.Time // block → when its activation answered
	notify chan struct{}
}

func (s *slowEngine) Activate(ctx context.Context, b core.Block) error {
	wait := 5 * time.Millisecond
	if b.ID == "cb-hang" && s.hang > 0 {
		wait = s.hang
	}
	select {
	case <-time.After(wait):
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := s.Sim.Activate(ctx, b); err != nil {
		return err
	}
	if b.ID != "cb-hang" {
		s.mu.Lock()
		s.done[b.ID] = time.Now()
		if s.notify != nil && len(s.done) >= slowEngineBlocks {
			close(s.notify)
			s.notify = nil
		}
		s.mu.Unlock()
	}
	return nil
}

// wait returns when the n other blocks' activations have answered.
func (s *slowEngine) wait(b *testing.B, n int) map[string]time.Time {
	s.mu.Lock()
	if len(s.done) >= n {
		defer s.mu.Unlock()
		return s.done
	}
	ch := make(chan struct{})
	s.notify = ch
	s.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		b.Fatalf("the other blocks' activations did not all answer in a minute")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}
