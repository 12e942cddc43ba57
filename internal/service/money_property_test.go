package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"capblock/internal/clock"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

// The property test of money (DESIGN.md, invariants 6 and 10): random
// operations of every kind that moves money, on a small fleet with
// teams under small budgets, on a real SQLite file and a simulated
// clock; after each operation the journals committed since the last
// check are read and checked (money_ledger_test.go):
//
//   - every journal balances, in one currency, its wallet postings
//     charges, refunds or credits, and every account together sums to 0;
//   - no team has had back more for a block's hours than it paid for
//     them;
//   - no team's own spending in a budget period exceeds its budget right
//     after the journals of an instant that charged it (one commit may
//     charge a team and credit it: a purchase of its own released hours);
//   - each block's escrow holds what the test expects from the
//     operations' results (fees in, refunds out, shares moved on a
//     transfer or resale), never below zero;
//   - each team's ledger comes in journal order (checked every
//     moneyLedgerEvery steps and at the end).
//
// CAPBLOCK_MONEY_SEED and CAPBLOCK_MONEY_OPS set the seed and the number
// of operations; a failure names both, the step and the operation.

const (
	// moneyOpsDefault keeps this test under two minutes in the suite's
	// run with the race detector on two busy cores (about 80
	// operations a second there); CI also runs 100,000 without it
	// (.ci/run).
	moneyOpsDefault  = 8_000
	moneySeedDefault = 20261201
	moneyLedgerEvery = 2_000
	moneySubRuns     = 4
)

// moneyVariant is an operator's policy a sub-run runs under.
type moneyVariant struct {
	refundBefore, refundAfter int
	credits                   bool
	transfers                 string
	approvalAbove             int
	resaleFee, lendCredit     int
}

var moneyVariants = []moneyVariant{
	{refundBefore: 100, refundAfter: 0, credits: false, transfers: core.TransfersAny, resaleFee: 10, lendCredit: 50},
	{refundBefore: 50, refundAfter: 25, credits: true, transfers: core.TransfersAdmin, approvalAbove: 1, resaleFee: 25, lendCredit: 100},
	{refundBefore: 100, refundAfter: 100, credits: false, transfers: core.TransfersAny, approvalAbove: 2, resaleFee: 0, lendCredit: 50},
	{refundBefore: 0, refundAfter: 50, credits: true, transfers: core.TransfersAny, resaleFee: 10, lendCredit: 0},
}

func TestMoneyProperty(t *testing.T) {
	seed := envInt(t, "CAPBLOCK_MONEY_SEED", moneySeedDefault)
	ops := envInt(t, "CAPBLOCK_MONEY_OPS", moneyOpsDefault)
	began := time.Now()
	for i := range moneySubRuns {
		v := moneyVariants[(int(seed)+i)%len(moneyVariants)]
		n := int(ops) / moneySubRuns
		if i < int(ops)%moneySubRuns {
			n++
		}
		t.Run(fmt.Sprintf("run%d", i), func(t *testing.T) {
			e := newMoneyEnv(t, seed, i, v)
			e.replay = fmt.Sprintf("CAPBLOCK_MONEY_SEED=%d CAPBLOCK_MONEY_OPS=%d go test -count=1 -run 'TestMoneyProperty/run%d$' ./internal/service/", seed, ops, i)
			for e.step = 1; e.step <= n; e.step++ {
				e.randomOp()
				e.check()
			}
			e.checkAll()
			t.Logf("%d operations, %d journals %v; refund %d%%/%d%%, budget counts credits %v, transfers %s",
				n, e.led.journals, e.led.kinds, v.refundBefore, v.refundAfter, v.credits, v.transfers)
		})
	}
	d := time.Since(began)
	t.Logf("%d operations in %s: %.0f/s", ops, d.Round(time.Millisecond), float64(ops)/d.Seconds())
}

func envInt(t *testing.T, name string, def int64) int64 {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a whole number", name, s)
	}
	return n
}

// moneyTypes are what the fleet sells: whole H100 nodes, pairs of their
// GPUs, and single L4 GPUs.
var moneyTypes = []core.InstanceType{
	{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: core.Money{Minor: 9832, Currency: "USD"}},
	{Name: "h100.2x", GPUModel: "H100", GPUsPerInstance: 2, OnDemand: core.Money{Minor: 2458, Currency: "USD"}},
	{Name: "l4.1x", GPUModel: "L4", GPUsPerInstance: 1, OnDemand: core.Money{Minor: 100, Currency: "USD"}},
}

// moneyEnv is one sub-run: a service on three H100 nodes and one node of
// four L4s, a SQLite file and a simulated clock, four teams (a without a
// budget; b with a small monthly one; c with a total one; d with a
// monthly one and a quota of two instances held), the model and the
// ledger check.
type moneyEnv struct {
	t      *testing.T
	ctx    context.Context
	svc    *Service
	st     *sqlite.Store
	sim    *clock.Sim
	limits core.Limits
	rng    *rand.Rand
	replay string

	teams   []string // ids
	names   map[string]string
	m       *moneyModel
	led     *ledgerCheck
	live    []*modelBlock // blocks that may still be changed
	plans   []moneyGroup
	series  []moneyGroup
	orders  []core.Order // open, as far as the test knows
	jobs    []core.Job   // preemptible, the last twenty submitted
	lastBuy *contract.PurchaseRequest

	step       int
	op         string
	noJournals bool // the operation must move no money
	tokens     int
}

// moneyGroup is a plan or a series: its id and team.
type moneyGroup struct{ id, team string }

func newMoneyEnv(t *testing.T, seed int64, sub int, v moneyVariant) *moneyEnv {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(moneyDir(t), "money.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	l := core.DefaultLimits()
	l.RefundBeforeStart, l.RefundAfterStart, l.BudgetCountsCredits = v.refundBefore, v.refundAfter, v.credits
	l.Transfers, l.ApprovalAboveInstances = v.transfers, v.approvalAbove
	l.ResaleFeePercent, l.LendCreditPercent = v.resaleFee, v.lendCredit
	f := core.Fleet{Currency: "USD", Limits: l, Pricing: core.DefaultPricing(), Types: moneyTypes}
	for i := range 3 {
		f.Nodes = append(f.Nodes, core.Node{Name: fmt.Sprintf("h%d", i), Zone: "z", Rack: fmt.Sprintf("r%d", i/2), GPUModel: "H100", GPUs: 8, Health: core.Healthy})
	}
	f.Nodes = append(f.Nodes, core.Node{Name: "l0", Zone: "z", Rack: "r9", GPUModel: "L4", GPUs: 4, Health: core.Healthy})
	sim := clock.NewSim(planT0)
	svc, err := New(ctx, Config{Fleet: f, Store: st, Clock: sim, Log: slog.New(slog.DiscardHandler), Workloads: newRecordedWorkloads()})
	if err != nil {
		t.Fatal(err)
	}
	e := &moneyEnv{t: t, ctx: ctx, svc: svc, st: st, sim: sim, limits: l, rng: rand.New(rand.NewPCG(uint64(seed), uint64(sub))),
		names: map[string]string{}, m: newMoneyModel()}
	budgets := map[string]moneyBudget{}
	for _, c := range []struct {
		name   string
		budget moneyBudget
	}{{"a", moneyBudget{}}, {"b", moneyBudget{core.BudgetMonth, 150_000}}, {"c", moneyBudget{core.BudgetTotal, 600_000}}, {"d", moneyBudget{core.BudgetMonth, 400_000}}} {
		tm, err := svc.CreateTeam(ctx, c.name)
		if err != nil {
			t.Fatal(err)
		}
		e.teams = append(e.teams, tm.ID)
		e.names[tm.ID] = c.name
		if c.budget.period == "" {
			continue
		}
		budgets[tm.ID] = c.budget
		if _, err := svc.PutBudget(ctx, core.Budget{Team: tm.ID, Amount: core.Money{Minor: c.budget.limit, Currency: "USD"}, Period: c.budget.period}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.PutQuota(ctx, core.Quota{Team: e.teams[3], MaxInstancesHeld: 2}); err != nil {
		t.Fatal(err)
	}
	e.led = newLedgerCheck("USD", v.credits, budgets, e.m.isBlock, e.names)
	return e
}

// moneyDir is where a sub-run's database goes: a directory in memory
// (/dev/shm) when the machine has one with room, where SQLite's sync of
// every commit costs nothing (on disk it takes about 40% of the test's
// time), else the test's temporary directory. A sub-run of 25,000
// operations writes about 10 MB.
func moneyDir(t *testing.T) string {
	var fs syscall.Statfs_t
	if syscall.Statfs("/dev/shm", &fs) == nil && fs.Bavail*uint64(fs.Bsize) >= 256<<20 {
		if dir, err := os.MkdirTemp("/dev/shm", "capblock-money-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// fail stops the sub-run, naming what replays it.
func (e *moneyEnv) fail(format string, args ...any) {
	e.t.Helper()
	e.t.Fatalf("step %d, operation %s at %s:\n%s\nreplay: %s", e.step, e.op, e.now().Format(time.RFC3339),
		fmt.Sprintf(format, args...), e.replay)
}

// refused fails unless err is nil or one of the refusals an operation
// may meet; it reports whether the operation went through.
func (e *moneyEnv) refused(err error, normal ...error) bool {
	e.t.Helper()
	if err == nil {
		return false
	}
	for _, n := range normal {
		if errors.Is(err, n) {
			return true
		}
	}
	e.fail("unexpected error: %v", err)
	return true
}

func (e *moneyEnv) now() time.Time { return e.sim.Now() }

func (e *moneyEnv) token() string {
	e.tokens++
	return fmt.Sprintf("money-%d", e.tokens)
}

func (e *moneyEnv) team() string { return e.teams[e.rng.IntN(len(e.teams))] }

// otherTeam is a team other than team.
func (e *moneyEnv) otherTeam(team string) string {
	for {
		if u := e.team(); u != team {
			return u
		}
	}
}

// pickType is an instance type and a count of it.
func (e *moneyEnv) pickType() (core.InstanceType, int) {
	t := moneyTypes[e.rng.IntN(len(moneyTypes))]
	if t.GPUsPerInstance == 8 {
		return t, 1 + e.rng.IntN(2)
	}
	return t, 1 + e.rng.IntN(4)
}

// pickBlock is a block that may still be changed, or nil.
func (e *moneyEnv) pickBlock() *modelBlock {
	if len(e.live) == 0 {
		return nil
	}
	return e.live[e.rng.IntN(len(e.live))]
}

// scope is the block's team, or an admin ("") one time in ten.
func (e *moneyEnv) scope(b *modelBlock) string {
	if e.rng.IntN(10) == 0 {
		return ""
	}
	return b.team
}

// randomOp runs one operation, chosen by weight, a second after the
// last: what the service orders by time then by its random ids comes in
// the same order when a seed is replayed.
func (e *moneyEnv) randomOp() {
	if _, err := e.sim.Set(e.now().Add(time.Second)); err != nil {
		e.t.Fatal(err)
	}
	e.op, e.noJournals = "none (nothing to act on)", false
	ops := []struct {
		weight int
		run    func()
	}{
		{12, e.opClock},
		{18, e.opPurchase},
		{2, e.opPurchaseAgain},
		{7, e.opExtend},
		{8, e.opCancel},
		{8, e.opTransfer},
		{5, e.opRelease},
		{5, e.opPlan},
		{3, e.opCancelPlan},
		{3, e.opSeries},
		{2, e.opCancelSeries},
		{4, e.opOrder},
		{1, e.opCancelOrder},
		{3, e.opServeOrders},
		{4, e.opLending},
		{4, e.opSpotJob},
		{3, e.opStopJob},
		{2, e.opHolderJob},
		{5, e.opJobLoop},
		{2, e.opApprove},
	}
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	n := e.rng.IntN(total)
	for _, o := range ops {
		if n < o.weight {
			o.run()
			return
		}
		n -= o.weight
	}
}

// check reads the journals committed by the step and checks them, then
// compares the escrows they moved, and those the model changed, with the
// model.
func (e *moneyEnv) check() {
	e.t.Helper()
	js, err := e.st.Journals(e.ctx, store.JournalFilter{After: e.led.lastSeq})
	if err != nil {
		e.fail("reading the journals: %v", err)
	}
	if e.noJournals && len(js) > 0 {
		e.fail("the operation must move no money, yet it committed %d journals, the first %s about %s", len(js), js[0].Kind, js[0].Subject)
	}
	if err := e.led.read(js); err != nil {
		e.fail("%v", err)
	}
	ids := make([]string, 0, len(e.led.touched)+len(e.m.dirty))
	for id := range e.led.touched {
		ids = append(ids, id)
	}
	for id := range e.m.dirty {
		if !e.led.touched[id] {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		e.compareEscrow(id)
	}
	for _, team := range e.teams {
		if got, want := e.led.unspot[core.WalletAccount(team)], e.m.wallets[team]; got != want {
			e.fail("team %s's wallet, spot runs apart, holds %d by the journals; the operations' results say %d", e.names[team], got, want)
		}
	}
	if got := e.led.unspot[core.RevenueAccount]; got != e.m.revenue {
		e.fail("the revenue, spot runs apart, is %d by the journals; the operations' results say %d", got, e.m.revenue)
	}
	clear(e.led.touched)
	clear(e.m.dirty)
	if e.step%moneyLedgerEvery == 0 {
		e.checkAll()
	}
}

func (e *moneyEnv) compareEscrow(id string) {
	e.t.Helper()
	b, ok := e.m.blocks[id]
	if !ok {
		e.fail("a journal moved the escrow of block %s, which no operation made", id)
	}
	if got := e.led.escrow(id); got != b.escrow || b.escrow < 0 {
		e.fail("block %s (team %s, fee %d, paid %d): its escrow holds %d by the journals; the operations' results say %d",
			id, e.names[b.team], b.fee, b.paid, got, b.escrow)
	}
}

// checkAll checks every team's ledger as the store returns it, and every
// block's escrow.
func (e *moneyEnv) checkAll() {
	e.t.Helper()
	for _, team := range e.teams {
		lines, err := e.st.Ledger(e.ctx, team)
		if err != nil {
			e.fail("reading team %s's ledger: %v", team, err)
		}
		if err := e.led.checkLedger(team, lines); err != nil {
			e.fail("%v", err)
		}
	}
	for _, b := range e.m.order {
		e.compareEscrow(b.id)
	}
}
