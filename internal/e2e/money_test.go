package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"capblock/internal/core"
)

// The money tests run the built binary on handOnFleet (two whole-node
// h100.8x nodes) with the limits of the test, and follow a team's money
// through purchases, cancellations and hand-overs: what a team is
// charged, refunded and credited, and what it reports as spent.

// moneyEnv is `capblock serve` on handOnFleet with teams alpha and beta
// and a member token of each; the helpers of handOnEnv that speak HTTP
// work on it (its ledger, which reads the store, does not: see
// moneyEnv.ledger).
type moneyEnv struct {
	*handOnEnv
	bin, adminTok string
}

func startMoney(t *testing.T, limits string) *moneyEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the capblock binary")
	}
	bin, dir := buildBinary(t), t.TempDir()
	fleetFile := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(fleetFile, []byte(fmt.Sprintf(handOnFleet, limits)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcessWith(t, bin, filepath.Join(dir, "capblock.db"), ts(t0), "--fleet", fleetFile, "--allow-unisolated-jobs")
	useToken(t, p.url, filepath.Join(dir, "admin.token"))
	e := &env{t: t, url: p.url}
	e.team = e.whoami().Team
	f := newAuthzFixture(e)
	h := &handOnEnv{env: e, f: f, alpha: f.alpha, beta: f.beta, admins: e.team,
		alphaTok: f.token(core.RoleMember), betaTok: f.newToken(f.user(f.beta, "member-b", core.RoleMember))}
	return &moneyEnv{handOnEnv: h, bin: bin, adminTok: f.token(core.RoleAdmin)}
}

// transfer transfers a block's hours to team at price ("" for none) as
// the holder of token ("" for the admin).
func (m *moneyEnv) transfer(token, blockID, team, price string) handOnAnswer {
	m.t.Helper()
	body := map[string]any{"team": team}
	if price != "" {
		body["price"] = price
	}
	var a handOnAnswer
	if code := call(m.t, m.url, "POST", "/v1/blocks/"+blockID+"/transfer", body, &a, tok(token)...); code != 200 || a.Received == nil {
		m.t.Fatalf("transferring %s to %s at %q: %d %+v", blockID, team, price, code, a)
	}
	return a
}

// cancelQuote is the refund a cancellation of the block would give now.
func (m *moneyEnv) cancelQuote(token, blockID string) money {
	m.t.Helper()
	var q struct {
		Refund money `json:"refund"`
	}
	if code := call(m.t, m.url, "GET", "/v1/blocks/"+blockID+"/cancel-quote", nil, &q, tok(token)...); code != 200 {
		m.t.Fatalf("the cancel quote of %s: %d", blockID, code)
	}
	return q.Refund
}

func (m *moneyEnv) cancel(token, blockID string) {
	m.t.Helper()
	var p problem
	if code := call(m.t, m.url, "POST", "/v1/blocks/"+blockID+"/cancel", nil, &p, tok(token)...); code != 200 {
		m.t.Fatalf("cancelling %s: %d %s %s", blockID, code, p.Code, p.Detail)
	}
}

type moneyLedgerEntry struct {
	ID        string    `json:"id"`
	Seq       int64     `json:"seq"`
	JournalID string    `json:"journalId"`
	Time      time.Time `json:"time"`
	Kind      string    `json:"kind"`
	Amount    money     `json:"amount"`
	Subject   string    `json:"subject"`
}

type moneyLedger struct {
	Entries []moneyLedgerEntry `json:"entries"`
	Gross   money              `json:"gross"`
	Refunds money              `json:"refunds"`
	Credits money              `json:"credits"`
	Net     money              `json:"net"`
}

// ledger is a team's ledger as GET /v1/teams/{id}/ledger answers it to
// the admin.
func (m *moneyEnv) ledger(team string) moneyLedger {
	m.t.Helper()
	var l moneyLedger
	if code := call(m.t, m.url, "GET", "/v1/teams/"+team+"/ledger", nil, &l); code != 200 {
		m.t.Fatalf("the ledger of %s: %d", team, code)
	}
	return l
}

// lines is the entries as "kind subject amount" lines, sorted.
func (l moneyLedger) lines() []string {
	out := []string{}
	for _, e := range l.Entries {
		out = append(out, e.Kind+" "+e.Subject+" "+e.Amount.Amount)
	}
	sort.Strings(out)
	return out
}

// refunded is the sum of the refunds of subject.
func (l moneyLedger) refunded(t *testing.T, subject string) int64 {
	var n int64
	for _, e := range l.Entries {
		if e.Kind == core.LedgerRefund && e.Subject == subject {
			n += minor(t, e.Amount.Amount)
		}
	}
	return n
}

// h100 is the h100.8x type as the server lists it.
func (m *moneyEnv) h100() (onDemandMinor int64, gpusPerInstance int64) {
	m.t.Helper()
	var out struct {
		InstanceTypes []struct {
			Name            string `json:"name"`
			GPUsPerInstance int64  `json:"gpusPerInstance"`
			OnDemandPrice   money  `json:"onDemandPrice"`
		} `json:"instanceTypes"`
	}
	if code := call(m.t, m.url, "GET", "/v1/instance-types", nil, &out); code != 200 {
		m.t.Fatalf("instance types: %d", code)
	}
	for _, it := range out.InstanceTypes {
		if it.Name == "h100.8x" {
			return minor(m.t, it.OnDemandPrice.Amount), it.GPUsPerInstance
		}
	}
	m.t.Fatal("no h100.8x among the instance types")
	return 0, 0
}

// gpuHoursOf is all the GPU-hours a block of h100.8x holds.
func (m *moneyEnv) gpuHoursOf(b block) int64 {
	_, gpus := m.h100()
	return gpus * int64(b.InstanceCount) * int64(b.EndTime.Sub(b.StartTime)/time.Hour)
}

// share is fee's share of part of all GPU-hours, truncated to minor units.
func share(fee, part, all int64) int64 { return fee * part / all }

func usd(minor int64) string { return core.Money{Minor: minor}.String() }

// TestMoneyTransferThenCancel: under the default policy (all of the fee
// back before the start, nothing after it) alpha's active block refunds
// nothing; an admin transfers its remaining hours to beta for nothing,
// and beta's cancellation of them refunds nothing either: hours received
// for free are not money beta paid.
func TestMoneyTransferThenCancel(t *testing.T) {
	m := startMoney(t, "{}")
	b := m.buyAs(m.alphaTok, 1, 6)
	m.advance(2 * time.Hour) // an hour into the block
	if q := m.cancelQuote(m.alphaTok, b.ID); q.Amount != "0.00" {
		t.Fatalf("alpha's cancel quote of its active block: %s; want 0.00 under the default policy", q.Amount)
	}
	a := m.transfer("", b.ID, m.beta, "")
	if !a.Received.StartTime.Equal(t0.Add(3 * time.Hour)) {
		t.Fatalf("the received block starts %s; want the next hour, %s", a.Received.StartTime, t0.Add(3*time.Hour))
	}
	if q := m.cancelQuote(m.betaTok, a.Received.ID); q.Amount != "0.00" {
		t.Errorf("beta's cancel quote of the block it received for nothing: %s; want 0.00", q.Amount)
	}
	m.cancel(m.betaTok, a.Received.ID)
	if got := m.ledger(m.beta).refunded(t, a.Received.ID); got != 0 {
		t.Errorf("beta cancelling the block it received for nothing was refunded %s; want 0.00 (beta's ledger %v)",
			usd(got), m.ledger(m.beta).lines())
	}
}

// TestMoneyPricedTransferRefundBounded: a refund is the policy's percent
// of what the cancelling team paid for the hours, bounded by the fee's
// share of them: refund = pct × min(price paid, fee share). Hours handed
// on after the block's start are refunded at the after-start percent, as
// they would be to the holder; hours handed on before it at the
// before-start percent.
func TestMoneyPricedTransferRefundBounded(t *testing.T) {
	m := startMoney(t, "{transfers: any, refundAfterStartPercent: 50}")

	// 1. After the start: 4 of the block's 6 hours go to beta for a
	//    tenth of the fee, less than their share of it.
	b := m.buyAs(m.alphaTok, 1, 6)
	m.advance(2 * time.Hour)
	fee := minor(t, b.UpfrontFee.Amount)
	price := fee / 10
	a := m.transfer(m.alphaTok, b.ID, m.beta, usd(price))
	if s := share(fee, a.Handover.GPUHours, m.gpuHoursOf(b)); price >= s {
		t.Fatalf("the price %s is not below the fee share %s of the %d GPU-hours transferred", usd(price), usd(s), a.Handover.GPUHours)
	}
	bound := price * 50 / 100
	if q := minor(t, m.cancelQuote(m.betaTok, a.Received.ID).Amount); q > bound {
		t.Errorf("beta's cancel quote of hours bought for %s after the block's start: %s; want at most %s (50%% of the price)",
			usd(price), usd(q), usd(bound))
	}
	m.cancel(m.betaTok, a.Received.ID)
	if got := m.ledger(m.beta).refunded(t, a.Received.ID); got > bound {
		t.Errorf("beta cancelling hours bought for %s after the block's start was refunded %s; want at most %s (50%% of the price)",
			usd(price), usd(got), usd(bound))
	}

	// 2. Before the start: the whole block goes to beta for a quarter of
	//    its fee; beta's cancellation before the start refunds at most
	//    what beta paid.
	c := m.buyAs(m.alphaTok, 10, 6)
	price = minor(t, c.UpfrontFee.Amount) / 4
	a = m.transfer(m.alphaTok, c.ID, m.beta, usd(price))
	if a.Handover.GPUHours != m.gpuHoursOf(c) {
		t.Fatalf("a transfer before the start moved %d GPU-hours; want the whole block's %d", a.Handover.GPUHours, m.gpuHoursOf(c))
	}
	if q := minor(t, m.cancelQuote(m.betaTok, a.Received.ID).Amount); q > price {
		t.Errorf("beta's cancel quote before the start of a block bought for %s: %s; want at most %s", usd(price), usd(q), usd(price))
	}
	m.cancel(m.betaTok, a.Received.ID)
	if got := m.ledger(m.beta).refunded(t, a.Received.ID); got > price {
		t.Errorf("beta cancelling before the start a block bought for %s was refunded %s; want at most %s", usd(price), usd(got), usd(price))
	}
}

// TestMoneyCreditsDoNotRaiseBudget: a budget bounds what a team spends
// of its own (charges less refunds); a credit for hours it sold to
// another team is income, not a refund, and makes no room under it.
func TestMoneyCreditsDoNotRaiseBudget(t *testing.T) {
	m := startMoney(t, "{transfers: any}")
	x := m.buyAs(m.alphaTok, 2, 6)
	spent := minor(t, x.UpfrontFee.Amount)
	m.transfer(m.alphaTok, x.ID, m.beta, usd(spent/2)) // alpha is credited half its fee

	s := t0.Add(10 * time.Hour)
	var offs struct {
		Offerings []offering `json:"offerings"`
	}
	if code := call(t, m.url, "GET", "/v1/offerings?"+searchQuery("h100.8x", 1, 6, s, s.Add(6*time.Hour)), nil, &offs, m.alphaTok); code != 200 || len(offs.Offerings) == 0 {
		t.Fatalf("search: %d, %d offerings", code, len(offs.Offerings))
	}
	next := offs.Offerings[0]
	// The budget is one minor unit short of alpha's spend with the next
	// purchase: alpha's own spend is under it, the purchase takes it over.
	budget := spent + minor(t, next.UpfrontFee.Amount) - 1
	var p problem
	if code := call(t, m.url, "PUT", "/v1/teams/"+m.alpha+"/budget", map[string]any{
		"amount": map[string]any{"amount": usd(budget), "currency": "USD"}, "period": "total"}, &p); code != 200 {
		t.Fatalf("setting alpha's budget: %d %s %s", code, p.Code, p.Detail)
	}
	p = problem{}
	code := call(t, m.url, "POST", "/v1/blocks", map[string]any{"offeringId": next.OfferingID, "clientToken": "over-budget"}, &p, m.alphaTok)
	if code != 402 || p.Code != "budget_exceeded" {
		t.Errorf("a purchase of %s taking alpha's own spend of %s to %s, over its budget of %s: %d %s; want 402 budget_exceeded",
			next.UpfrontFee.Amount, usd(spent), usd(spent+minor(t, next.UpfrontFee.Amount)), usd(budget), code, p.Code)
	}
}

// TestMoneyLedgerOrder: blocks bought and cancelled at one simulated
// instant: the ledger lists each block's charge before its refund, in
// the journals' order (seq increasing), each entry naming its journal.
func TestMoneyLedgerOrder(t *testing.T) {
	m := startMoney(t, "{}")
	var ids []string
	for range 3 {
		b := m.buyAs(m.alphaTok, 2, 6)
		m.cancel(m.alphaTok, b.ID)
		ids = append(ids, b.ID)
	}
	l := m.ledger(m.alpha)
	var got []string
	for _, e := range l.Entries {
		got = append(got, fmt.Sprintf("%d %s %s %s (journal %q)", e.Seq, e.Kind, e.Subject, e.Amount.Amount, e.JournalID))
	}
	if len(l.Entries) != 2*len(ids) {
		t.Fatalf("alpha's ledger %q; want a charge and a refund of each of %v", got, ids)
	}
	for i, e := range l.Entries {
		if e.JournalID == "" || e.Seq <= 0 || (i > 0 && e.Seq <= l.Entries[i-1].Seq) {
			t.Errorf("alpha's ledger is not in journal order, each entry with its journal: %q", got)
			break
		}
	}
	pos := map[string]int{}
	for i, e := range l.Entries {
		pos[e.Kind+" "+e.Subject] = i
	}
	for _, id := range ids {
		c, okc := pos["charge "+id]
		r, okr := pos["refund "+id]
		if !okc || !okr || c > r {
			t.Errorf("block %s: its charge is not listed before its refund: %q", id, got)
		}
	}
}

type moneySpendRow struct {
	Team         string `json:"team"`
	InstanceType string `json:"instanceType"`
	Month        string `json:"month"`
	Gross        money  `json:"gross"`
	Refunds      money  `json:"refunds"`
	Credits      money  `json:"credits"`
	Net          money  `json:"net"`
	Spent        money  `json:"spent"`
	OnDemand     money  `json:"onDemand"`
	Savings      money  `json:"savings"`
}

// spendLine is a spend row's amounts on one line.
func spendLine(r moneySpendRow) string {
	return fmt.Sprintf("gross %q refunds %q credits %q net %q spent %q onDemand %q savings %q",
		r.Gross.Amount, r.Refunds.Amount, r.Credits.Amount, r.Net.Amount, r.Spent.Amount, r.OnDemand.Amount, r.Savings.Amount)
}

// wantSpend is the spend row of a team charged gross, with no refunds
// nor credits, whose hours held cost spent and onDemand on demand.
func wantSpend(gross, spent, onDemand int64) moneySpendRow {
	return moneySpendRow{Gross: money{Amount: usd(gross)}, Refunds: money{Amount: "0.00"}, Credits: money{Amount: "0.00"},
		Net: money{Amount: usd(gross)}, Spent: money{Amount: usd(spent)}, OnDemand: money{Amount: usd(onDemand)},
		Savings: money{Amount: usd(onDemand - spent)}}
}

// TestMoneySpendAfterTransfer: alpha buys an 8-hour block and, an hour
// in, an admin transfers its hours from the next hour (the last 6) to
// beta for nothing. The spend report follows the hours: each team's
// spent is the fee's share of the hours it held, its on-demand the
// on-demand cost of those hours, its savings their difference; gross,
// refunds, credits and net are what it was charged and paid back. The
// CLI shows the new columns.
func TestMoneySpendAfterTransfer(t *testing.T) {
	m := startMoney(t, "{}")
	b := m.buyAs(m.alphaTok, 1, 8)
	m.advance(2 * time.Hour)
	a := m.transfer("", b.ID, m.beta, "")
	fee, all, moved := minor(t, b.UpfrontFee.Amount), m.gpuHoursOf(b), a.Handover.GPUHours
	held, movedFee := all-moved, share(fee, moved, all)
	perInstanceHour, gpus := m.h100()
	onDemand := func(gpuHours int64) int64 { return perInstanceHour * gpuHours / gpus }
	teams := []struct {
		name, id string
		gpuHours int64
		want     moneySpendRow
	}{
		{"alpha", m.alpha, held, wantSpend(fee, fee-movedFee, onDemand(held))},
		{"beta", m.beta, moved, wantSpend(0, movedFee, onDemand(moved))},
	}

	var sp struct {
		Rows []moneySpendRow `json:"rows"`
	}
	if code := call(t, m.url, "GET", "/v1/spend", nil, &sp); code != 200 {
		t.Fatalf("spend: %d", code)
	}
	for _, tm := range teams {
		var got moneySpendRow
		for _, r := range sp.Rows {
			if r.Team == tm.id && r.InstanceType == "h100.8x" {
				got = r
			}
		}
		if spendLine(got) != spendLine(tm.want) {
			t.Errorf("%s's spend row (%d of %d GPU-hours held):\n got %s\nwant %s", tm.name, tm.gpuHours, all, spendLine(got), spendLine(tm.want))
		}
		if strings.HasPrefix(got.Savings.Amount, "-") {
			t.Errorf("%s's savings are negative: %s", tm.name, got.Savings.Amount)
		}
	}

	out, errOut, code := runCLI(t, m.bin, m.url, m.adminTok, "spend")
	header, _, _ := strings.Cut(out, "\n")
	var missing []string
	for _, w := range []string{"GROSS", "REFUNDS", "CREDITS", "NET"} {
		if !slices.Contains(strings.Fields(header), w) {
			missing = append(missing, w)
		}
	}
	if code != 0 || len(missing) > 0 {
		t.Errorf("capblock spend: exit %d, header %q lacks %v (stderr %q)", code, header, missing, errOut)
	}
}

// TestMoneyLedgerTotals: a team's ledger sums its entries: gross is what
// it was charged, refunds what cancellations paid back, credits what it
// earned from hours another team bought, net gross less both; an entry is
// a charge, a refund or a credit.
func TestMoneyLedgerTotals(t *testing.T) {
	m := startMoney(t, "{transfers: any}")
	x := m.buyAs(m.alphaTok, 2, 6)
	y := m.buyAs(m.alphaTok, 2, 6)
	m.cancel(m.alphaTok, y.ID) // before its start: the whole fee back
	fx, fy := minor(t, x.UpfrontFee.Amount), minor(t, y.UpfrontFee.Amount)
	price := fx / 4
	a := m.transfer(m.alphaTok, x.ID, m.beta, usd(price))

	for _, c := range []struct {
		name, team                   string
		entries                      []string
		gross, refunds, credits, net int64
	}{
		{"alpha", m.alpha, []string{"charge " + x.ID + " " + usd(fx), "charge " + y.ID + " " + usd(fy), "credit " + x.ID + " " + usd(price), "refund " + y.ID + " " + usd(fy)},
			fx + fy, fy, price, fx - price},
		{"beta", m.beta, []string{"charge " + a.Received.ID + " " + usd(price)},
			price, 0, 0, price},
	} {
		l := m.ledger(c.team)
		sort.Strings(c.entries)
		if got := l.lines(); fmt.Sprint(got) != fmt.Sprint(c.entries) {
			t.Errorf("%s's ledger entries %q; want %q", c.name, got, c.entries)
		}
		got := fmt.Sprintf("gross %q refunds %q credits %q net %q", l.Gross.Amount, l.Refunds.Amount, l.Credits.Amount, l.Net.Amount)
		want := fmt.Sprintf("gross %q refunds %q credits %q net %q", usd(c.gross), usd(c.refunds), usd(c.credits), usd(c.net))
		if got != want {
			t.Errorf("%s's ledger totals:\n got %s\nwant %s", c.name, got, want)
		}
	}
}

// TestMoneyAWSExtensionRetry: an SDK that retries
// PurchaseCapacityBlockExtension after a lost answer sends the same
// offering again; through the binary the retry answers the extension the
// first call bought, and the team is charged for it once.
func TestMoneyAWSExtensionRetry(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server binary")
	}
	a := startAWS(t)
	ec2c, ctx := a.ec2, t.Context()

	offers, err := ec2c.DescribeCapacityBlockOfferings(ctx, &ec2.DescribeCapacityBlockOfferingsInput{
		InstanceType: aws.String("g6.xlarge"), InstanceCount: aws.Int32(1), CapacityDurationHours: aws.Int32(4),
		StartDateRange: aws.Time(t0.Add(2 * time.Hour)), EndDateRange: aws.Time(t0.Add(48 * time.Hour)),
	})
	if err != nil || len(offers.CapacityBlockOfferings) == 0 {
		t.Fatalf("DescribeCapacityBlockOfferings: %v", err)
	}
	bought, err := ec2c.PurchaseCapacityBlock(ctx, &ec2.PurchaseCapacityBlockInput{
		CapacityBlockOfferingId: offers.CapacityBlockOfferings[0].CapacityBlockOfferingId, InstancePlatform: "Linux/UNIX",
	})
	if err != nil {
		t.Fatalf("PurchaseCapacityBlock: %v", err)
	}
	id := bought.CapacityReservation.CapacityReservationId
	exts, err := ec2c.DescribeCapacityBlockExtensionOfferings(ctx, &ec2.DescribeCapacityBlockExtensionOfferingsInput{
		CapacityReservationId: id, CapacityBlockExtensionDurationHours: aws.Int32(2),
	})
	if err != nil || len(exts.CapacityBlockExtensionOfferings) == 0 {
		t.Fatalf("DescribeCapacityBlockExtensionOfferings: %v", err)
	}
	in := &ec2.PurchaseCapacityBlockExtensionInput{CapacityReservationId: id,
		CapacityBlockExtensionOfferingId: exts.CapacityBlockExtensionOfferings[0].CapacityBlockExtensionOfferingId}
	first, err := ec2c.PurchaseCapacityBlockExtension(ctx, in)
	if err != nil {
		t.Fatalf("PurchaseCapacityBlockExtension: %v", err)
	}
	again, err := ec2c.PurchaseCapacityBlockExtension(ctx, in)
	if err != nil {
		t.Fatalf("PurchaseCapacityBlockExtension retried with the same offering: %v; want the extension bought first", err)
	}
	x, y := first.CapacityBlockExtensions, again.CapacityBlockExtensions
	if len(x) != 1 || len(y) != 1 || aws.ToString(x[0].CapacityBlockExtensionOfferingId) != aws.ToString(y[0].CapacityBlockExtensionOfferingId) ||
		!aws.ToTime(x[0].CapacityBlockExtensionEndDate).Equal(aws.ToTime(y[0].CapacityBlockExtensionEndDate)) ||
		aws.ToString(x[0].UpfrontFee) != aws.ToString(y[0].UpfrontFee) {
		t.Fatalf("the retry answered %+v; want the first answer %+v", y, x)
	}
	var l moneyLedger
	must(t, json.Unmarshal([]byte(a.cli("teams", "ledger", a.team.ID)), &l))
	if got := l.lines(); len(got) != 2 {
		t.Fatalf("ledger after an extension and its retry: %v; want the purchase and one extension charge", got)
	}
}
