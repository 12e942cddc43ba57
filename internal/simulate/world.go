package simulate

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"capblock/internal/backend"
	"capblock/internal/backend/local"
	"capblock/internal/clock"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/service"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

// Config is one run of the simulation: one seed, a number of steps.
type Config struct {
	Seed uint64
	Ops  int
	// Dir is where the database goes; the run makes a directory of its
	// own in it and removes it at the end. Empty is os.TempDir().
	Dir string
	// Faults are the rates of the injected faults; the zero value takes
	// DefaultFaults.
	Faults Faults
	// Mutant, when set, wraps the real store under the faults: a store
	// with a defect planted, to show that the checks find it.
	Mutant func(store.Full) store.Full
	// MutantEngine, when set, wraps the engine the service calls: an
	// engine with a defect planted.
	MutantEngine func(backend.Backend) backend.Backend
	// MutantSim, when set, is the engine in place of the sim backend,
	// under the faults of the calls: one with a defect planted.
	MutantSim func(nodes []core.Node) Engine
	// MutantWorkloads, when set, wraps the workloads the service runs
	// jobs on: a runner with a defect planted.
	MutantWorkloads func(backend.Workloads) backend.Workloads
	// Trace, when set, is told every step as it ends.
	Trace func(line string)
	// FullCheckEvery is how many steps apart the checker compares every
	// stored block with what it knows (0: 500); the other steps check
	// what the step changed.
	FullCheckEvery int
}

// Faults are the probabilities of the injected faults.
type Faults struct {
	// CommitFails and CommitLosesAnswer are per Commit of the store.
	CommitFails, CommitLosesAnswer float64
	// EngineFails and EngineLosesAnswer are per engine call (the first
	// maxEngineFaults tries of each).
	EngineFails, EngineLosesAnswer float64
	// RecordFails and RecordLosesAnswer are per record of the outbox
	// worker (an action done, or tried again).
	RecordFails, RecordLosesAnswer float64
	// EngineHangs is per engine call, as EngineFails: the call hangs
	// until the caller's context ends, and reaches the engine later, out
	// of order, or never (faultlate.go).
	EngineHangs float64
	// CommitCrashes is per Commit: the server dies during it, before the
	// change is durable or once it is, and is started again after the
	// step (faultcrash.go).
	CommitCrashes float64
	// CommitSlow is per Commit of an operation on a slow store: the
	// clock moves by minutes during the commit (faultlatency.go).
	CommitSlow float64
	// LeaderDeposed is per pass of the leader that may be deposed: its
	// lease expires while its first engine call hangs, and a new server
	// leads meanwhile (faultleader.go).
	LeaderDeposed float64
}

// DefaultFaults fail about one commit in 33, one engine call in 8 and
// one record of the outbox in 25; hang one engine call in 50; kill the
// server in one commit in 250; make half the commits of an operation on
// a slow store slow, and depose half the leaders that may be.
var DefaultFaults = Faults{CommitFails: 0.015, CommitLosesAnswer: 0.015, EngineFails: 0.08, EngineLosesAnswer: 0.05,
	RecordFails: 0.02, RecordLosesAnswer: 0.02, EngineHangs: 0.02, CommitCrashes: 0.004, CommitSlow: 0.5, LeaderDeposed: 0.5}

// Report is what a run did.
type Report struct {
	Seed uint64
	Ops  int
	// Transcript is a hash of every step's operation and outcome: two runs
	// of one seed that agree on it made the same steps with the same
	// answers.
	Transcript uint64
	Counts     map[string]int // operations by kind and outcome
	// The faults injected.
	CommitsFailed, CommitsLost, RecordsFailed, RecordsLost, EngineFailed, EngineLost, Crashes int
	// EngineHung counts the engine calls that hung; of those, LateLanded
	// reached the engine later and LateRefused were refused there by its
	// version fence. CommitsDied counts the commits the server died in,
	// SlowCommits the time slow commits took, LeadersDeposed the leaders
	// deposed while their engine call hung.
	EngineHung, LateLanded, LateRefused, CommitsDied, LeadersDeposed int
	SlowCommits                                                      time.Duration
	Blocks                                                           int // blocks stored at the end
	Elapsed                                                          time.Duration
}

// Failure is an invariant found broken, or an answer no client should
// get, at a step of a seed.
type Failure struct {
	Seed uint64
	Ops  int
	Step int    // 0: setup; Ops+1: the end (quiescence)
	Op   string // the step's operation and what it met
	Now  time.Time
	Msg  string
	Last []string // the operations before, oldest first
}

func (f *Failure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, step %d of %d at %s: %s\n  operation: %s", f.Seed, f.Step, f.Ops, f.Now.Format(time.RFC3339), f.Msg, f.Op)
	if len(f.Last) > 0 {
		b.WriteString("\n  the steps before:")
		for _, l := range f.Last {
			b.WriteString("\n    " + l)
		}
	}
	return b.String()
}

// t0 is when every run's clock starts.
var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// world is one run: the service, what it runs on, the simulation's
// record of what was acknowledged (model) and the checker.
type world struct {
	cfg   Config
	ctx   context.Context
	rng   *rand.Rand // the operations and their arguments
	fleet core.Fleet

	dbPath string
	st     *sqlite.Store // the real store of the running service
	fs     *faultStore
	engine *faultEngine
	// backend is what the service calls: the engine, or a mutant of it.
	backend backend.Backend
	clock   *clock.Sim // the service's clock, as the running service reads it
	outbox  *clock.Sim // the outbox worker's clock
	svc     *service.Service
	g       *service.Guarded

	admin core.Principal
	teams []*simTeam

	m   *model
	chk *checker
	// wl runs the jobs' instances; jobs is what the simulation knows of
	// the jobs (jobops.go).
	wl   *simWorkloads
	jobs *jobWorld

	step    int
	op      strings.Builder
	last    []string
	hash    hash.Hash64
	counts  map[string]int
	crashes int
}

// simTeam is a team and the member the simulation acts as.
type simTeam struct {
	id, name string
	member   core.Principal
	// users are the team's members that sign in with a token, once
	// opUser has met the team: member is one of them, never a disabled
	// one.
	users    []*simUser
	budget   *core.Budget
	maxHeld  int  // its quota of instances held at once; 0: none
	disabled bool // as last acknowledged
}

// Run runs cfg.Ops steps of the seed and checks every invariant after
// each; it returns a *Failure when one breaks.
func Run(ctx context.Context, cfg Config) (rep Report, err error) {
	began := time.Now()
	if cfg.Faults == (Faults{}) {
		cfg.Faults = DefaultFaults
	}
	if cfg.FullCheckEvery <= 0 {
		cfg.FullCheckEvery = 500
	}
	dir, err := os.MkdirTemp(cfg.Dir, "capblock-sim-")
	if err != nil {
		return Report{}, fmt.Errorf("making the run's directory: %w", err)
	}
	defer os.RemoveAll(dir)
	// The seed's streams, each drawn from root in the order it was added,
	// so that a stream added later leaves the others as they were.
	root := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	opsRng := rand.New(rand.NewPCG(root.Uint64(), root.Uint64()))
	storeRng := rand.New(rand.NewPCG(root.Uint64(), root.Uint64()))
	engineSeed := root.Uint64()
	moreStoreRng := rand.New(rand.NewPCG(root.Uint64(), root.Uint64()))
	workloadsRng := rand.New(rand.NewPCG(root.Uint64(), root.Uint64()))
	w := &world{
		cfg: cfg, ctx: ctx, dbPath: filepath.Join(dir, "capblock.db"),
		rng:    opsRng,
		fs:     newFaultStore(storeRng, moreStoreRng, cfg.Faults),
		fleet:  simFleet(),
		outbox: clock.NewSim(t0),
		hash:   fnv.New64a(),
		counts: map[string]int{},
		m:      newModel(),
		chk:    newChecker(),
		jobs:   newJobWorld(),
	}
	w.chk.jobs = w.jobs
	w.wl = newSimWorkloads(workloadsRng, func() time.Time { return w.clock.Now() })
	w.fs.injectedHook = func(f commitFault) { w.note("[%s]", f) }
	w.fs.slowHook = w.commitTakes
	var sim Engine = local.NewSim(slog.New(slog.DiscardHandler), w.fleet.Nodes)
	if cfg.MutantSim != nil {
		sim = cfg.MutantSim(w.fleet.Nodes)
	}
	w.engine = newFaultEngine(sim, engineSeed, cfg.Faults)
	w.engine.lateHook = func(c lateCall, taken bool) {
		w.note("[a hung %s of %s at version %d reached the engine; taken %v]", c.kind, c.block.ID, c.block.Version, taken)
	}
	w.backend = w.engine
	if cfg.MutantEngine != nil {
		w.backend = cfg.MutantEngine(w.engine)
	}
	defer func() {
		if w.st != nil {
			w.st.Close()
		}
	}()
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		f, ok := r.(*Failure)
		if !ok {
			f = w.failure(fmt.Sprintf("panic: %v\n%s", r, debug.Stack()))
		}
		err = f
	}()
	w.setup()
	for w.step = 1; w.step <= cfg.Ops; w.step++ {
		w.randomOp()
		w.restartIfDied()
		w.check()
	}
	w.step = cfg.Ops + 1
	w.begin("quiesce")
	w.quiesce()
	w.checkFinal()
	w.end()
	rep = Report{Seed: cfg.Seed, Ops: cfg.Ops, Transcript: w.hash.Sum64(), Counts: w.counts, Crashes: w.crashes,
		Blocks: len(w.chk.stored), Elapsed: time.Since(began)}
	rep.CommitsFailed, rep.CommitsLost, rep.RecordsFailed, rep.RecordsLost = w.fs.injected()
	rep.EngineFailed, rep.EngineLost, rep.EngineHung = w.engine.injected()
	rep.LateLanded, rep.LateRefused = w.engine.lateCounts()
	rep.CommitsDied, rep.SlowCommits = w.fs.injectedMore()
	rep.LeadersDeposed = w.counts["leader/deposed"]
	return rep, nil
}

// simFleet is four H100 nodes of eight GPUs on two racks and two L4
// nodes of four, selling whole H100 nodes, pairs of H100s and single
// L4s. Blocks of more than three instances wait for an admin's
// approval; members may transfer their blocks; a cancellation after the
// start refunds half.
func simFleet() core.Fleet {
	l := core.DefaultLimits()
	l.ApprovalAboveInstances = 3
	l.Transfers = core.TransfersAny
	l.RefundAfterStart = 50
	f := core.Fleet{Currency: "USD", Limits: l, Pricing: core.DefaultPricing(), Types: []core.InstanceType{
		{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: core.Money{Minor: 9832, Currency: "USD"}},
		{Name: "h100.2x", GPUModel: "H100", GPUsPerInstance: 2, OnDemand: core.Money{Minor: 2458, Currency: "USD"}},
		{Name: "l4.1x", GPUModel: "L4", GPUsPerInstance: 1, OnDemand: core.Money{Minor: 100, Currency: "USD"}},
	}}
	for i := range 4 {
		f.Nodes = append(f.Nodes, core.Node{Name: fmt.Sprintf("h%d", i), Zone: "z1", Rack: fmt.Sprintf("r%d", i/2),
			GPUModel: "H100", GPUs: 8, Health: core.Healthy})
	}
	for i := range 2 {
		f.Nodes = append(f.Nodes, core.Node{Name: fmt.Sprintf("l%d", i), Zone: "z1", Rack: "r9",
			GPUModel: "L4", GPUs: 4, Health: core.Healthy})
	}
	return f
}

// setup starts the service on a new database and makes the teams: alpha
// without limits, beta under a monthly budget, gamma under a quota of
// three instances held, and the operators' team of the admin.
func (w *world) setup() {
	w.begin("setup")
	w.start()
	ctx := w.ctx
	ops, err := w.svc.CreateTeam(ctx, "ops")
	w.must(err)
	admin, err := w.svc.CreateUser(ctx, "root", ops.ID, core.RoleAdmin)
	w.must(err)
	w.admin = core.Principal{User: admin}
	for _, name := range []string{"alpha", "beta", "gamma"} {
		t, err := w.svc.CreateTeam(ctx, name)
		w.must(err)
		u, err := w.svc.CreateUser(ctx, name+"-dev", t.ID, core.RoleMember)
		w.must(err)
		w.teams = append(w.teams, &simTeam{id: t.ID, name: name, member: core.Principal{User: u}})
	}
	beta := w.teams[1]
	beta.budget = &core.Budget{Team: beta.id, Amount: core.Money{Minor: 2_000_000, Currency: "USD"}, Period: core.BudgetMonth}
	_, err = w.g.PutBudget(w.as(w.admin), *beta.budget)
	w.must(err)
	w.teams[2].maxHeld = 3
	_, err = w.g.PutQuota(w.as(w.admin), core.Quota{Team: w.teams[2].id, MaxInstancesHeld: w.teams[2].maxHeld})
	w.must(err)
	w.chk.led.budgets = map[string]core.Budget{beta.id: *beta.budget}
	w.chk.led.names = map[string]string{}
	for _, t := range w.teams {
		w.chk.led.names[t.id] = t.name
	}
	w.end()
}

// start opens the store and starts a service on it, as `capblock serve
// --sim-clock` does: the clock goes on from the time stored (t0 on a new
// database). Faults are off while it starts: a start that failed would
// be tried again anyway.
func (w *world) start() {
	st, err := sqlite.Open(w.ctx, w.dbPath)
	if err != nil {
		w.fail("opening the database: %v", err)
	}
	w.st = st
	now, ok, err := st.SimClock(w.ctx)
	if err != nil {
		w.fail("reading the stored clock: %v", err)
	}
	if !ok {
		if now, err = st.SaveSimClock(w.ctx, t0); err != nil {
			w.fail("storing the clock: %v", err)
		}
	}
	w.clock = clock.NewSim(now)
	var inner store.Full = st
	if w.cfg.Mutant != nil {
		inner = w.cfg.Mutant(inner)
	}
	w.fs.swap(inner)
	w.fs.setOff(true)
	defer w.fs.setOff(false)
	var wl backend.Workloads = w.wl
	if w.cfg.MutantWorkloads != nil {
		wl = w.cfg.MutantWorkloads(wl)
	}
	svc, err := service.New(w.ctx, service.Config{
		Fleet: w.fleet, Store: w.fs, Backend: w.backend, Clock: w.clock, Log: w.serviceLog(), Workloads: wl,
		Outbox: service.OutboxOptions{
			Clock:  w.outbox,
			Jitter: func(d time.Duration) time.Duration { return d },
			// One action at a time: the engine's calls come in the
			// order of the store's queue, the same on a replay.
			Parallel: 1,
			// Never given up on: the engine always takes an action in
			// the end (maxEngineFaults), and convergence is checked.
			GiveUpAfter: 100 * 365 * 24 * time.Hour,
			// Long: a call that hangs answers at once (faultlate.go).
			CallTimeout: callTimeout,
		},
	})
	if err != nil {
		w.fail("starting the service: %v", err)
	}
	w.svc, w.g = svc, svc.Guarded()
}

// serviceLog is where the service logs: nowhere, or, while tracing,
// its warnings and errors go into the trace.
func (w *world) serviceLog() *slog.Logger {
	if w.cfg.Trace == nil {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(traceWriter(w.cfg.Trace), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// traceWriter writes each line into the trace.
type traceWriter func(string)

func (t traceWriter) Write(p []byte) (int, error) {
	t("    log: " + strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// crash drops the service between two steps, as kill -9 would (nothing
// of it runs between steps: there is nothing to stop), and starts a new
// one on the same database file. The clock must go on from where it
// was.
func (w *world) crash() {
	before := w.clock.Now()
	w.st.Close()
	w.st, w.svc, w.g = nil, nil, nil
	w.crashes++
	w.start()
	if now := w.clock.Now(); !now.Equal(before) {
		w.fail("the clock showed %s before the crash and %s after it", before.Format(time.RFC3339), now.Format(time.RFC3339))
	}
	w.chk.afterCrash = true
	// The restarted service knows each node's health as acknowledged
	// (DESIGN.md, invariant 9).
	views, err := w.g.Nodes(w.as(w.admin))
	w.must(err)
	for _, v := range views {
		want := w.m.health[v.Node.Name]
		if want == "" {
			want = core.Healthy
		}
		if v.Node.Health != want && !w.m.pendingNode(v.Node.Name) && !engineSays(v.Record, want) {
			w.fail("after the restart node %s is %s; the last acknowledged change made it %s", v.Node.Name, v.Node.Health, want)
		}
	}
}

// as is the context of a call made by p.
func (w *world) as(p core.Principal) context.Context { return contract.WithPrincipal(w.ctx, p) }

func (w *world) now() time.Time { return w.clock.Now() }

// begin starts a step's record: its operation, then what it met (note).
func (w *world) begin(format string, args ...any) {
	w.op.Reset()
	fmt.Fprintf(&w.op, format, args...)
}

// note adds what the operation met to the step's record.
func (w *world) note(format string, args ...any) {
	w.op.WriteString("; ")
	fmt.Fprintf(&w.op, format, args...)
}

// count counts an operation's outcome for the report.
func (w *world) count(what string) { w.counts[what]++ }

// end closes the step's record: it goes into the transcript and the
// list of recent steps.
func (w *world) end() {
	line := fmt.Sprintf("%d %s: %s", w.step, w.now().Format(time.RFC3339), w.op.String())
	w.hash.Write([]byte(line))
	w.hash.Write([]byte{'\n'})
	if len(w.last) == 12 {
		w.last = append(w.last[:0], w.last[1:]...)
	}
	w.last = append(w.last, line)
	if w.cfg.Trace != nil {
		w.cfg.Trace(line)
	}
}

func (w *world) failure(msg string) *Failure {
	f := &Failure{Seed: w.cfg.Seed, Ops: w.cfg.Ops, Step: w.step, Op: w.op.String(), Msg: msg}
	if w.clock != nil {
		f.Now = w.clock.Now()
	}
	if n := len(w.last); n > 0 && strings.HasPrefix(w.last[n-1], fmt.Sprintf("%d ", w.step)) {
		n-- // the step itself is Op
		f.Last = append(f.Last, w.last[:n]...)
	} else {
		f.Last = append(f.Last, w.last...)
	}
	return f
}

// fail stops the run with a failure at this step.
func (w *world) fail(format string, args ...any) {
	panic(w.failure(fmt.Sprintf(format, args...)))
}

// must fails the run on an error that no fault explains.
func (w *world) must(err error) {
	if err != nil {
		w.fail("unexpected error: %v", err)
	}
}

// injected reports whether err is (or wraps) an injected fault.
func injected(err error) bool { return errors.Is(err, errInjected) }
