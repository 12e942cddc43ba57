package service

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"capblock/internal/clock"
	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

// restartNow is the simulated time of the reconciler and restart
// benchmarks.
var restartNow = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// blocksPerNode is how many blocks storedFleet books on each node.
const blocksPerNode = 10

// storedFleet is n 8-GPU H100 nodes (4 zones, racks of 50) sold whole
// and by the GPU, and 10 spare nodes that storedBlocks leaves free.
func storedFleet(n int) core.Fleet {
	f := core.Fleet{Currency: "USD", Limits: core.DefaultLimits(), Pricing: core.DefaultPricing(), Types: []core.InstanceType{
		{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: core.Money{Minor: 9832, Currency: "USD"}},
		{Name: "h100.1x", GPUModel: "H100", GPUsPerInstance: 1, OnDemand: core.Money{Minor: 1229, Currency: "USD"}},
	}}
	for i := range n {
		f.Nodes = append(f.Nodes, core.Node{Name: fmt.Sprintf("n%05d", i), Zone: fmt.Sprintf("zone-%d", i%4),
			Rack: fmt.Sprintf("r%03d", i/50), GPUModel: "H100", GPUs: 8, Health: core.Healthy})
	}
	for i := range 10 {
		f.Nodes = append(f.Nodes, core.Node{Name: fmt.Sprintf("spare-%d", i), Zone: "zone-0", Rack: "spare",
			GPUModel: "H100", GPUs: 8, Health: core.Healthy})
	}
	return f
}

// storedBlocks books blocksPerNode blocks on each of the first n nodes of
// storedFleet(n), one after another over about 8 weeks from restartNow:
// the first active since an hour ago, the others scheduled, whole nodes
// and single GPUs in turn, 24 to 71 hours each, none due before
// restartNow plus an hour. Blocks of 50 teams.
func storedBlocks(f core.Fleet, n int) []core.Block {
	blocks := make([]core.Block, 0, n*blocksPerNode)
	for i := range n {
		node := f.Nodes[i]
		start := restartNow.Add(-time.Hour)
		for k := range blocksPerNode {
			hours := 24 + (i*7+k*13)%48
			b := core.Block{ID: fmt.Sprintf("cb-%05d-%02d", i, k), Name: "stored", Team: fmt.Sprintf("team-%02d", (i+k)%50),
				InstanceType: "h100.8x", GPUModel: "H100", Count: 1, Zone: node.Zone, State: core.StateScheduled,
				Start: start, End: start.Add(time.Duration(hours) * time.Hour), CreatedAt: restartNow.Add(-24 * time.Hour),
				Fee:        core.Money{Minor: 9832 * int64(hours), Currency: "USD"},
				Placements: []core.Placement{{Node: node.Name, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}},
				Tags:       map[string]string{"project": fmt.Sprintf("p%d", i%20)}}
			if k == 0 {
				b.State = core.StateActive
			}
			if k%2 == 1 {
				b.InstanceType, b.Placements[0].GPUs = "h100.1x", []int{i % 8}
			}
			blocks = append(blocks, b)
			start = b.End.Add(time.Duration(1+(i+k)%24) * time.Hour)
		}
	}
	return blocks
}

// storeBlocksAt writes blocks into a new SQLite file at path, 5,000 to
// a change.
func storeBlocksAt(tb testing.TB, path string, blocks []core.Block) {
	tb.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	for len(blocks) > 0 {
		n := min(len(blocks), 5000)
		if err := st.Commit(ctx, store.Change{Insert: blocks[:n]}); err != nil {
			tb.Fatalf("storing blocks: %v", err)
		}
		blocks = blocks[n:]
	}
}

// BenchmarkReconcile is one reconciler pass with 10 blocks due (each
// becomes active: 10 updates, events and activate actions committed to
// SQLite) and with none due (a simulated-clock tick), on fleets of 100
// and 10,000 nodes holding 1,000 and 100,000 stored blocks. The 10 due
// blocks are stored on spare nodes before each pass, with the timer
// stopped, and cancelled after it. The cost of a pass should not depend
// on the blocks stored.
func BenchmarkReconcile(b *testing.B) {
	for _, nodes := range []int{100, 10_000} {
		f := storedFleet(nodes)
		path := filepath.Join(b.TempDir(), "capblock.db")
		storeBlocksAt(b, path, storedBlocks(f, nodes))
		ctx := context.Background()
		st, err := sqlite.Open(ctx, path)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		svc, err := New(ctx, Config{Fleet: f, Store: st, Clock: clock.NewSim(restartNow), Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		stored := nodes * blocksPerNode
		round := 0 // the sub-benchmark runs more than once: ids stay new
		b.Run(fmt.Sprintf("blocks=%d/due=10", stored), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				round++
				ids := storeDue(b, svc, round)
				b.StartTimer()
				if err := svc.Reconcile(ctx); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				for _, id := range ids {
					if bl, _ := svc.index.Block(id); bl == nil || bl.State != core.StateActive {
						b.Fatalf("block %s is not active after the pass: %+v", id, bl)
					}
					if _, err := svc.CancelBlock(ctx, "team-due", id); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
			}
		})
		b.Run(fmt.Sprintf("blocks=%d/due=0", stored), func(b *testing.B) {
			for range b.N {
				if err := svc.Reconcile(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// storeDue stores, as a purchase would, one block on each spare node that
// starts now, so that its activation is due, and returns their ids.
func storeDue(b *testing.B, svc *Service, round int) []string {
	now := svc.clock.Now()
	var c store.Change
	var ids []string
	for k := range 10 {
		id := fmt.Sprintf("cb-due-%06d-%d", round, k)
		c.Insert = append(c.Insert, core.Block{ID: id, Name: "due", Team: "team-due", InstanceType: "h100.8x", GPUModel: "H100",
			Count: 1, Zone: "zone-0", State: core.StateScheduled, Start: now, End: now.Add(48 * time.Hour), CreatedAt: now,
			Fee: core.Money{Minor: 1, Currency: "USD"}, Placements: []core.Placement{{Node: fmt.Sprintf("spare-%d", k), GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}})
		ids = append(ids, id)
	}
	if err := svc.store.Commit(context.Background(), c); err != nil {
		b.Fatal(err)
	}
	svc.mu.Lock()
	svc.applyCommitted(c)
	svc.mu.Unlock()
	return ids
}

// BenchmarkRestart is a restart with 100,000 blocks stored on 10,000
// nodes, up to its first answer (first-answer: opening the SQLite file,
// service.New, that is the inventory, node health, the live blocks loaded
// and indexed, then one offering search), and two of its parts alone:
// load (opening the file and reading the live blocks) and index
// (core.NewIndex of the blocks read). The file is written once, before
// the timer; it is in the page cache, as after a restart of the process
// (not of the machine). Besides the wall time it reports the process's
// CPU time per restart, steadier on a shared machine.
func BenchmarkRestart(b *testing.B) {
	const nodes = 10_000
	f := storedFleet(nodes)
	path := filepath.Join(b.TempDir(), "capblock.db")
	storeBlocksAt(b, path, storedBlocks(f, nodes))
	ctx := context.Background()
	open := func(b *testing.B) *sqlite.Store {
		st, err := sqlite.Open(ctx, path)
		if err != nil {
			b.Fatal(err)
		}
		return st
	}
	load := func(b *testing.B, st *sqlite.Store) []core.Block {
		blocks, err := st.ListBlocks(ctx, store.BlockFilter{States: liveStates})
		if err != nil || len(blocks) != nodes*blocksPerNode {
			b.Fatalf("loading: %d blocks, %v", len(blocks), err)
		}
		return blocks
	}
	b.Run("part=first-answer", func(b *testing.B) {
		req := core.SearchRequest{Types: []string{"h100.8x"}, Count: 2, Duration: 48 * time.Hour,
			StartAfter: restartNow.Add(time.Hour), EndBefore: restartNow.Add(2 * 7 * 24 * time.Hour)}
		measureCPU(b, func() {
			st := open(b)
			defer st.Close()
			svc, err := New(ctx, Config{Fleet: f, Store: st, Clock: clock.NewSim(restartNow), Log: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			if offers, err := svc.Offerings(ctx, req); err != nil || len(offers) == 0 {
				b.Fatalf("first search: %d offerings, %v", len(offers), err)
			}
		})
	})
	b.Run("part=load", func(b *testing.B) {
		measureCPU(b, func() {
			st := open(b)
			defer st.Close()
			load(b, st)
		})
	})
	b.Run("part=index", func(b *testing.B) {
		st := open(b)
		blocks := load(b, st)
		st.Close()
		measureCPU(b, func() {
			if _, err := core.NewIndex(&f, blocks, restartNow); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// measureCPU runs op b.N times and reports, with the wall time, the
// process's CPU time (user and system) per op.
func measureCPU(b *testing.B, op func()) {
	cpu0 := cpuTime()
	b.ResetTimer()
	for range b.N {
		op()
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
}

// cpuTime is the user and system time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
