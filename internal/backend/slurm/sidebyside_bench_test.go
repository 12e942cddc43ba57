package slurm_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"capblock/internal/backend/slurm"
	"capblock/internal/core"
	"capblock/internal/slurmtest"
)

// The side-by-side trace: about 1,000 whole-node requests of 1–4 nodes
// for 1–24 hours, starting on the hour over 4 weeks, on a 64-node
// cluster, from a fixed seed. Each request arrives in trace order, all
// of them at the half's start (a burst of purchases for the next month).
const (
	sideBySideNodes    = 64
	sideBySideRequests = 1000
	sideBySideWeeks    = 4
	// sideBySideParallel is how many calls the parallel halves keep in
	// flight: the outbox's default (OutboxOptions.Parallel).
	sideBySideParallel = 8
)

// traceRequest is one request of the trace: count whole nodes from
// start hours after the half's base, for hours hours.
type traceRequest struct{ count, start, hours int }

func sideBySideTrace() []traceRequest {
	rng := rand.New(rand.NewPCG(2026, 12))
	out := make([]traceRequest, sideBySideRequests)
	for i := range out {
		out[i] = traceRequest{count: 1 + rng.IntN(4), start: rng.IntN(sideBySideWeeks * 7 * 24), hours: 1 + rng.IntN(24)}
	}
	return out
}

// hourlyBound is how many requests of trace a perfect hour-by-hour count
// of nodes grants: in trace order, a request is granted when at every
// hour of its window the nodes of the requests granted before it leave
// at least its count free. It is what capblock's index accepts
// (core.TestPackingWholeNodes holds Place to it).
func hourlyBound(trace []traceRequest, nodes int) int {
	booked := make([]int, sideBySideWeeks*7*24+24)
	granted := 0
	for _, r := range trace {
		fits := true
		for h := r.start; h < r.start+r.hours; h++ {
			fits = fits && booked[h]+r.count <= nodes
		}
		if !fits {
			continue
		}
		for h := r.start; h < r.start+r.hours; h++ {
			booked[h] += r.count
		}
		granted++
	}
	return granted
}

// halfResult is what one half of the side by side measured.
type halfResult struct {
	full, fewer, refused int
	created              int           // reservations created
	calls                time.Duration // wall time of the Slurm calls that create them (refusals included)
	ctldCPU              time.Duration // slurmctld's CPU time over those calls
	moves                int           // reservations moved to other nodes (capblock's re-packs)
	repacks              int           // purchases that moved reservations
	moveCalls            time.Duration // wall time of the Slurm calls that move them
	moveCPU              time.Duration // slurmctld's CPU time over those calls
	recreated            int           // moved reservations deleted and created again (blocks that swapped nodes)
	place                time.Duration // capblock's own placement (Place and Add), wall
	loggedRefusal        bool          // a refused move has been logged
	// parallel: the calls ran sideBySideParallel at a time, and calls is
	// the wall time of them all, moves included.
	parallel bool
}

func (r halfResult) report(b *testing.B, bound int) {
	b.ReportMetric(float64(r.full), "full")
	b.ReportMetric(float64(r.fewer), "fewer")
	b.ReportMetric(float64(r.refused), "refused")
	b.ReportMetric(float64(bound), "hourly-bound")
	b.ReportMetric(float64(r.created)/r.calls.Seconds(), "resv/s")
	b.ReportMetric(float64(r.ctldCPU.Microseconds())/1000/float64(r.created), "ctld-ms/resv")
	if r.moves > 0 && !r.parallel {
		b.ReportMetric(r.moveCalls.Seconds(), "move-s")
		b.ReportMetric(float64(r.moveCPU.Microseconds())/1000/float64(r.created), "move-ctld-ms/resv")
	}
	if r.moves > 0 {
		b.ReportMetric(float64(r.moves), "moves")
		b.ReportMetric(float64(r.repacks), "repacks")
		b.ReportMetric(float64(r.recreated), "recreated")
		b.ReportMetric(float64(r.created)/(r.calls+r.moveCalls).Seconds(), "with-moves-resv/s")
	}
	if r.place > 0 {
		b.ReportMetric(float64(r.place.Microseconds())/sideBySideRequests, "place-µs/req")
	}
}

// BenchmarkSlurmSideBySide places the trace, each time on a fresh 64-node
// cluster: by Slurm (`scontrol create reservation NodeCnt=k`, Slurm picks
// the nodes), with all 64 nodes responding and with 2, and by capblock
// (core.Index places; the reservation is created with explicit Nodes=,
// through the backend's Reserve or with its scontrol call alone, after
// the reservations of the tentative blocks a re-pack moved are moved).
// Both sides send their commands over the same transport, the backend's
// (Config.Scontrol): a process per call, or its scontrol sessions.
// responding is how many of the 64 nodes run a slurmd; the others are
// declared only and never respond (slurmtest.Options.Declared). Run it
// with -benchtime 1x: each iteration starts its own cluster. The
// figures are in docs/benchmarks.md.
func BenchmarkSlurmSideBySide(b *testing.B) {
	trace := sideBySideTrace()
	bound := hourlyBound(trace, sideBySideNodes)
	opts := func(responding int) slurmtest.Options {
		return slurmtest.Options{Nodes: responding, Declared: sideBySideNodes - responding, StartTimeout: 5 * time.Minute}
	}
	for _, transport := range []string{slurm.ScontrolProcess, slurm.ScontrolSession} {
		for _, responding := range []int{64, 2} {
			if responding != sideBySideNodes && transport != slurm.ScontrolProcess {
				continue // a question of placement, not of transport
			}
			b.Run(fmt.Sprintf("slurm-NodeCnt/scontrol=%s/responding=%d", transport, responding), func(b *testing.B) {
				var r halfResult
				for range b.N {
					b.StopTimer()
					c := slurmtest.Start(b, opts(responding))
					be := sideBySideBackend(b, c, transport)
					b.StartTimer()
					r = slurmPlaces(b, c, be, trace, 1)
				}
				r.report(b, bound)
			})
		}
		// Slurm's placement with the requests sent 8 at a time, in trace
		// order: slurmctld places them one at a time as they arrive, so
		// the order, and what each request gets, may differ from run to
		// run.
		b.Run(fmt.Sprintf("slurm-NodeCnt/scontrol=%s/parallel=%d/responding=64", transport, sideBySideParallel), func(b *testing.B) {
			var r halfResult
			for range b.N {
				b.StopTimer()
				c := slurmtest.Start(b, opts(sideBySideNodes))
				be := sideBySideBackend(b, c, transport)
				b.StartTimer()
				r = slurmPlaces(b, c, be, trace, sideBySideParallel)
			}
			r.report(b, bound)
		})
		// Explicit nodes do not depend on which nodes respond (Slurm
		// takes even down ones): every node responds here, as in the
		// first half. "Reserve" goes through the backend as the outbox
		// does (a create, one call; a move reads and updates); "create"
		// is its one scontrol call.
		for _, via := range []string{"Reserve", "create"} {
			b.Run(fmt.Sprintf("capblock-Nodes/scontrol=%s/via=%s/responding=64", transport, via), func(b *testing.B) {
				var r halfResult
				for range b.N {
					b.StopTimer()
					c := slurmtest.Start(b, opts(sideBySideNodes))
					b.StartTimer()
					r = capblockPlaces(b, c, transport, trace, via)
				}
				r.report(b, bound)
				if r.full != bound {
					b.Errorf("capblock granted %d requests, the hourly count allows %d", r.full, bound)
				}
			})
		}
		// Through Reserve as the outbox runs it: the purchases are
		// decided one by one, and their reserve actions (each moved
		// block's, then the new block's) applied 8 at a time, those of
		// one block in order.
		b.Run(fmt.Sprintf("capblock-Nodes/scontrol=%s/via=Reserve/parallel=%d/responding=64", transport, sideBySideParallel), func(b *testing.B) {
			var r halfResult
			for range b.N {
				b.StopTimer()
				c := slurmtest.Start(b, opts(sideBySideNodes))
				b.StartTimer()
				r = capblockPlacesParallel(b, c, transport, trace)
			}
			r.report(b, bound)
			if r.full != bound {
				b.Errorf("capblock granted %d requests, the hourly count allows %d", r.full, bound)
			}
		})
	}
}

// sideBySideBackend is a backend on c whose scontrol commands take
// transport (Config.Scontrol), with its default number of sessions;
// the side by side sends either side's commands through it.
func sideBySideBackend(b *testing.B, c *slurmtest.Cluster, transport string) *slurm.Backend {
	be, err := slurm.New(b.Context(), slurm.Config{Conf: c.Conf, SoldModels: []string{"H100"}, Scontrol: transport,
		Teams: map[string]slurm.Access{"team-1": {Users: []string{"nobody"}}}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(be.Close)
	if got := len(be.SessionPIDs()) > 0; got != (transport == slurm.ScontrolSession) {
		b.Fatalf("scontrol=%s: sessions running: %v", transport, got)
	}
	return be
}

// reserver holds a block's nodes in Slurm: the backend, or scontrol
// alone.
type reserver interface {
	Reserve(ctx context.Context, blk core.Block) error
}

// scontrolReserver creates a block's reservation with the backend's own
// scontrol call and no read before it, and moves it with one update of
// its nodes; a move that Slurm refuses for overlapping another block's
// reservation (which moves in the same re-pack) is sent again with
// OVERLAP, as the backend does.
type scontrolReserver struct {
	be      *slurm.Backend
	created map[string]bool
}

func (s scontrolReserver) Reserve(ctx context.Context, blk core.Block) error {
	var nodes []string
	for _, p := range blk.Placements {
		nodes = append(nodes, p.Node)
	}
	args := []string{"update", "ReservationName=" + blk.ID, "Nodes=" + strings.Join(nodes, ","), "Flags=IGNORE_JOBS"}
	if !s.created[blk.ID] {
		args = []string{"create", "reservation", "ReservationName=" + blk.ID,
			"StartTime=" + blk.Start.UTC().Format("2006-01-02T15:04:05"),
			"EndTime=" + blk.End.UTC().Format("2006-01-02T15:04:05"),
			"Nodes=" + strings.Join(nodes, ","), "Flags=IGNORE_JOBS", "Users=nobody"}
	}
	_, err := s.be.Scontrol(ctx, args...)
	if err != nil && s.created[blk.ID] && strings.Contains(err.Error(), "overlaps") {
		args[len(args)-1] += ",OVERLAP"
		_, err = s.be.Scontrol(ctx, args...)
	}
	if err != nil {
		return err
	}
	s.created[blk.ID] = true
	return nil
}

// halfBase is the hour the trace's hour 0 stands for: two hours ahead,
// so that every block is still tentative (before its lock-in, an hour
// before its start) while the half runs, and Slurm takes every start.
func halfBase() time.Time { return time.Now().UTC().Truncate(time.Hour).Add(2 * time.Hour) }

// slurmPlaces asks Slurm for each request's reservation by node count,
// through be's transport, then reads back how many nodes each one got.
func slurmPlaces(b *testing.B, c *slurmtest.Cluster, be *slurm.Backend, trace []traceRequest, parallel int) halfResult {
	ctx := b.Context()
	base := halfBase()
	r := halfResult{parallel: parallel > 1}
	var mu sync.Mutex
	create := func(i int) {
		q := trace[i]
		args := []string{"create", "reservation", "ReservationName=" + sideBySideName("s", i),
			"StartTime=" + base.Add(time.Duration(q.start)*time.Hour).UTC().Format("2006-01-02T15:04:05"),
			"Duration=" + strconv.Itoa(q.hours*60), "NodeCnt=" + strconv.Itoa(q.count), "Users=nobody"}
		t0 := time.Now()
		_, err := be.Scontrol(ctx, args...)
		mu.Lock()
		defer mu.Unlock()
		if !r.parallel {
			r.calls += time.Since(t0)
		}
		switch {
		case err == nil:
			r.created++
		case strings.Contains(err.Error(), "Requested nodes are busy"):
			r.refused++
		default:
			b.Error(err)
		}
	}
	cpu0, t0 := controllerCPU(b, c), time.Now()
	if parallel <= 1 {
		for i := range trace {
			create(i)
		}
	} else {
		inTraceOrder(len(trace), parallel, create)
		r.calls = time.Since(t0)
	}
	r.ctldCPU = controllerCPU(b, c) - cpu0
	if b.Failed() {
		b.FailNow()
	}
	got := reservationNodeCounts(b, c)
	for i, q := range trace {
		n, ok := got[sideBySideName("s", i)]
		switch {
		case !ok:
		case n >= q.count:
			r.full++
		default:
			r.fewer++
		}
	}
	if r.full+r.fewer != r.created {
		b.Fatalf("Slurm created %d reservations, shows %d", r.created, r.full+r.fewer)
	}
	return r
}

// capblockPlaces places each request with capblock's index over the
// cluster's nodes (read through the backend, as the service reads its
// inventory) and has the backend reserve it, as the outbox does after a
// purchase: first the moved blocks, then the new one.
func capblockPlaces(b *testing.B, c *slurmtest.Cluster, transport string, trace []traceRequest, via string) halfResult {
	ctx := b.Context()
	be, ix, f := capblockIndex(b, c, transport)
	var res reserver = be
	if via == "create" {
		res = scontrolReserver{be: be, created: map[string]bool{}}
	}
	now := time.Now()
	base := halfBase()
	var r halfResult
	for i, q := range trace {
		t0 := time.Now()
		req := core.PlaceRequest{Type: f.Types[0], Count: q.count, Zone: c.Name,
			Start: base.Add(time.Duration(q.start) * time.Hour), End: base.Add(time.Duration(q.start+q.hours) * time.Hour)}
		plan, err := ix.Place(req, now)
		if errors.Is(err, core.ErrNoCapacity) {
			r.place += time.Since(t0)
			r.refused++
			continue
		}
		if err != nil {
			b.Fatal(err)
		}
		blk := core.Block{ID: sideBySideName("cb-", i), Team: "team-1", InstanceType: req.Type.Name, GPUModel: "H100",
			Count: q.count, Zone: c.Name, Start: req.Start, End: req.End, State: core.StateScheduled, Placements: plan.Placements}
		for _, m := range plan.Moves {
			if err := ix.Add(m); err != nil {
				b.Fatal(err)
			}
		}
		if err := ix.Add(blk); err != nil {
			b.Fatal(err)
		}
		r.place += time.Since(t0)
		// Each phase's share of slurmctld's CPU is read around it: a
		// reading is to the hundredth of a second, its error random,
		// so the sums over a thousand phases are close.
		if len(plan.Moves) > 0 {
			cpu0, t0 := controllerCPU(b, c), time.Now()
			r.recreated += moveReservations(b, c, res, plan.Moves, &r.loggedRefusal)
			r.moveCalls += time.Since(t0)
			r.moveCPU += controllerCPU(b, c) - cpu0
			r.moves += len(plan.Moves)
			r.repacks++
		}
		cpu0, t0 := controllerCPU(b, c), time.Now()
		if err := res.Reserve(ctx, blk); err != nil {
			b.Fatal(err)
		}
		r.calls += time.Since(t0)
		r.ctldCPU += controllerCPU(b, c) - cpu0
		r.created++
		r.full++
	}
	checkReservations(b, c, ix, r.created)
	return r
}

// capblockIndex is the backend on c (its scontrol commands through
// transport) and capblock's index over the
// cluster's nodes, read through the backend as the service reads its
// inventory, and its fleet.
func capblockIndex(b *testing.B, c *slurmtest.Cluster, transport string) (*slurm.Backend, *core.Index, *core.Fleet) {
	be := sideBySideBackend(b, c, transport)
	nodes, err := be.Inventory(b.Context()) // also what Reserve reads of the nodes
	if err != nil {
		b.Fatal(err)
	}
	f := &core.Fleet{Currency: "USD", Limits: core.DefaultLimits(), Pricing: core.DefaultPricing(), Nodes: nodes,
		Types: []core.InstanceType{{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: core.Money{Minor: 9832, Currency: "USD"}}}}
	ix, err := core.NewIndex(f, nil, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	return be, ix, f
}

// checkReservations holds what Slurm holds to what the index placed:
// one reservation per granted request, on its block's nodes.
func checkReservations(b *testing.B, c *slurmtest.Cluster, ix *core.Index, created int) {
	got := reservationNodes(b, c)
	for _, blk := range ix.Blocks() {
		var want []string
		for _, p := range blk.Placements {
			want = append(want, p.Node)
		}
		slices.Sort(want)
		if !slices.Equal(got[blk.ID], want) {
			b.Fatalf("reservation %s holds %v, its block %v", blk.ID, got[blk.ID], want)
		}
	}
	if len(got) != created {
		b.Fatalf("Slurm shows %d reservations, capblock created %d", len(got), created)
	}
}

// capblockPlacesParallel decides every request with capblock's index,
// as capblockPlaces does, then has the backend reserve them as the
// outbox would after the burst of purchases: each purchase's reserve
// actions (the moved blocks', then the new block's) in purchase order,
// sideBySideParallel at a time, the actions of one block one after the
// other (each block's go to the same worker). A create that meets a
// moved block's reservation not yet moved takes OVERLAP, as in the
// outbox; a refused action is applied again, as the outbox retries it.
func capblockPlacesParallel(b *testing.B, c *slurmtest.Cluster, transport string, trace []traceRequest) halfResult {
	ctx := b.Context()
	be, ix, f := capblockIndex(b, c, transport)
	base := halfBase()
	r := halfResult{parallel: true}
	var actions []core.Block
	now := time.Now()
	for i, q := range trace {
		t0 := time.Now()
		req := core.PlaceRequest{Type: f.Types[0], Count: q.count, Zone: c.Name,
			Start: base.Add(time.Duration(q.start) * time.Hour), End: base.Add(time.Duration(q.start+q.hours) * time.Hour)}
		plan, err := ix.Place(req, now)
		if errors.Is(err, core.ErrNoCapacity) {
			r.place += time.Since(t0)
			r.refused++
			continue
		}
		if err != nil {
			b.Fatal(err)
		}
		blk := core.Block{ID: sideBySideName("cb-", i), Team: "team-1", InstanceType: req.Type.Name, GPUModel: "H100",
			Count: q.count, Zone: c.Name, Start: req.Start, End: req.End, State: core.StateScheduled, Placements: plan.Placements}
		for _, m := range append(plan.Moves, blk) {
			if err := ix.Add(m); err != nil {
				b.Fatal(err)
			}
		}
		r.place += time.Since(t0)
		actions = append(actions, append(plan.Moves, blk)...)
		if len(plan.Moves) > 0 {
			r.moves += len(plan.Moves)
			r.repacks++
		}
		r.created++
		r.full++
	}
	// Each worker takes the actions of the blocks hashed to it, in order.
	queues := make([]chan core.Block, sideBySideParallel)
	var wg sync.WaitGroup
	var failed atomic.Int32
	cpu0, t0 := controllerCPU(b, c), time.Now()
	for w := range queues {
		queues[w] = make(chan core.Block, len(actions))
		wg.Go(func() {
			for blk := range queues[w] {
				var err error
				for try := 0; try < 5; try++ {
					if err = be.Reserve(ctx, blk); err == nil {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				if err != nil && failed.Add(1) == 1 {
					b.Errorf("reserving %s: %v", blk.ID, err)
				}
			}
		})
	}
	for _, blk := range actions {
		h := fnv.New32a()
		h.Write([]byte(blk.ID))
		queues[h.Sum32()%sideBySideParallel] <- blk
	}
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
	r.calls = time.Since(t0)
	r.ctldCPU = controllerCPU(b, c) - cpu0
	if b.Failed() {
		b.FailNow()
	}
	checkReservations(b, c, ix, r.created)
	return r
}

// inTraceOrder calls do(0), do(1), ... do(n-1), parallel at a time,
// each started in order.
func inTraceOrder(n, parallel int, do func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for i := range next {
				do(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// moveReservations brings the reservations of the blocks a re-pack moved
// to their new nodes. A move onto nodes that another moved block still
// holds is refused until that one has moved; what is left refused when
// no move goes through any more (blocks that swap nodes) is deleted and
// created again.
// It returns how many were created again.
func moveReservations(b *testing.B, c *slurmtest.Cluster, res reserver, moves []core.Block, logged *bool) int {
	ctx := b.Context()
	pending := moves
	for len(pending) > 0 {
		var left []core.Block
		for _, m := range pending {
			if err := res.Reserve(ctx, m); err != nil {
				if !*logged {
					*logged = true
					b.Logf("a move refused (later ones not logged): %v", err)
				}
				left = append(left, m)
			}
		}
		if len(left) < len(pending) {
			pending = left
			continue
		}
		for _, m := range left {
			if _, err := c.Run(ctx, "", "scontrol", "delete", "ReservationName="+m.ID); err != nil {
				b.Fatal(err)
			}
			if s, ok := res.(scontrolReserver); ok {
				delete(s.created, m.ID)
			}
		}
		for _, m := range left {
			if err := res.Reserve(ctx, m); err != nil {
				b.Fatal(err)
			}
		}
		return len(left)
	}
	return 0
}

func sideBySideName(prefix string, i int) string { return fmt.Sprintf("%s%04d", prefix, i) }

func controllerCPU(b *testing.B, c *slurmtest.Cluster) time.Duration {
	cpu, err := c.ControllerCPU()
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}

// reservationNodeCounts reads every reservation's node count, in one
// call.
func reservationNodeCounts(b *testing.B, c *slurmtest.Cluster) map[string]int {
	got := map[string]int{}
	for name, f := range reservationFields(b, c) {
		got[name], _ = strconv.Atoi(f["NodeCnt"])
	}
	return got
}

// reservationNodes reads every reservation's nodes, sorted, in one call.
func reservationNodes(b *testing.B, c *slurmtest.Cluster) map[string][]string {
	got := map[string][]string{}
	for name, f := range reservationFields(b, c) {
		nodes, err := slurm.ExpandHostlist(f["Nodes"])
		if err != nil {
			b.Fatal(err)
		}
		slices.Sort(nodes)
		got[name] = nodes
	}
	return got
}

// reservationFields reads every reservation's fields, in one call.
func reservationFields(b *testing.B, c *slurmtest.Cluster) map[string]map[string]string {
	out, err := c.Run(b.Context(), "", "scontrol", "--oneliner", "show", "reservation")
	if err != nil && !strings.Contains(err.Error(), "No reservations") {
		b.Fatal(err)
	}
	got := map[string]map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		f := map[string]string{}
		for _, w := range strings.Fields(line) {
			if k, v, ok := strings.Cut(w, "="); ok {
				f[k] = v
			}
		}
		if name := f["ReservationName"]; name != "" {
			got[name] = f
		}
	}
	return got
}
