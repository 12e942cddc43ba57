package service

import (
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/clock"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

// seriesT0 is a Monday two weeks before Europe/Madrid moves to summer
// time (2027-03-28).
var seriesT0 = time.Date(2027, 3, 15, 0, 0, 0, 0, time.UTC)

// seriesEnv is a service on one node of 4 L4 GPUs (l4.1x), on a
// simulated clock at seriesT0, with teams team-a and team-b; cancelled
// blocks before their start are refunded half.
type seriesEnv struct {
	t   *testing.T
	svc *Service
	st  *sqlite.Store
	sim *clock.Sim
}

func newSeriesEnv(t *testing.T, blocks ...core.Block) *seriesEnv {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "series.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Commit(ctx, store.Change{Insert: blocks}); err != nil {
		t.Fatal(err)
	}
	limits := core.DefaultLimits()
	limits.RefundBeforeStart = 50
	f := core.Fleet{Currency: "USD", Limits: limits, Pricing: core.DefaultPricing(),
		Types: []core.InstanceType{{Name: "l4.1x", GPUModel: "L4", GPUsPerInstance: 1, OnDemand: core.Money{Minor: 100, Currency: "USD"}}},
		Nodes: []core.Node{{Name: "l4-0", Zone: "z", Rack: "r", GPUModel: "L4", GPUs: 4, Health: core.Healthy}}}
	sim := clock.NewSim(seriesT0)
	svc, err := New(ctx, Config{Fleet: f, Store: st, Clock: sim, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, team := range []string{"team-a", "team-b", "team-c"} {
		if err := st.CreateTeam(ctx, core.Team{ID: team, Name: team, CreatedAt: seriesT0}); err != nil {
			t.Fatal(err)
		}
	}
	return &seriesEnv{t: t, svc: svc, st: st, sim: sim}
}

// workshop is "4 × l4.1x every weekday 09:00–17:00 Europe/Madrid" for
// weeks weeks from Monday 2027-03-22.
func workshop(team string, weeks int, partial bool) contract.SeriesSearchRequest {
	return contract.SeriesSearchRequest{Team: team, InstanceType: "l4.1x", Count: 4, Days: []string{"weekdays"},
		StartTime: "09:00", EndTime: "17:00", TimeZone: "Europe/Madrid", FromDate: "2027-03-22", Weeks: weeks, Partial: partial}
}

// l4Block is a scheduled block of team holding the whole L4 node over [start, end).
func l4Block(id, team string, start, end time.Time) core.Block {
	return core.Block{ID: id, Team: team, InstanceType: "l4.1x", GPUModel: "L4", Count: 4, Zone: "z",
		Start: start, End: end, State: core.StateScheduled, CreatedAt: seriesT0, Fee: core.Money{Minor: 1, Currency: "USD"},
		Placements: []core.Placement{{Node: "l4-0", GPUs: []int{0, 1, 2, 3}}}}
}

func (e *seriesEnv) search(req contract.SeriesSearchRequest) core.SeriesOffering {
	e.t.Helper()
	offers, err := e.svc.SeriesOfferings(e.t.Context(), req)
	if err != nil {
		e.t.Fatalf("SeriesOfferings: %v", err)
	}
	if len(offers) != 1 {
		e.t.Fatalf("SeriesOfferings: %d offerings, want 1 (one zone)", len(offers))
	}
	return offers[0]
}

func (e *seriesEnv) buy(team, offeringID, token string) contract.SeriesView {
	e.t.Helper()
	v, created, err := e.svc.PurchaseSeries(e.t.Context(), contract.SeriesPurchaseRequest{Team: team, OfferingID: offeringID, ClientToken: token, Name: "workshop"})
	if err != nil || !created {
		e.t.Fatalf("PurchaseSeries: created %v, %v", created, err)
	}
	return v
}

// TestSeriesAcrossDaylightSaving: the workshop's occurrences follow
// Madrid's wall time across 2027-03-28: 08:00Z before, 07:00Z after,
// each 8 hours; the series is one purchase of one block per occurrence,
// charged the sum of the occurrences' fees.
func TestSeriesAcrossDaylightSaving(t *testing.T) {
	e := newSeriesEnv(t)
	o := e.search(workshop("team-a", 2, false))
	var got []string
	var sum int64
	for _, oc := range o.Occurrences {
		if !oc.Fits {
			t.Fatalf("occurrence %s does not fit: %s", oc.Start, oc.Reason)
		}
		got = append(got, oc.Start.Format("Mon 01-02 15:04")+" "+oc.End.Sub(oc.Start).String())
		sum += oc.Fee.Minor
	}
	want := []string{
		"Mon 03-22 08:00 8h0m0s", "Tue 03-23 08:00 8h0m0s", "Wed 03-24 08:00 8h0m0s", "Thu 03-25 08:00 8h0m0s", "Fri 03-26 08:00 8h0m0s",
		"Mon 03-29 07:00 8h0m0s", "Tue 03-30 07:00 8h0m0s", "Wed 03-31 07:00 8h0m0s", "Thu 04-01 07:00 8h0m0s", "Fri 04-02 07:00 8h0m0s",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("occurrences in UTC (-want +got):\n%s", diff)
	}
	if o.ID == "" || o.Fee().Minor != sum || sum <= 0 {
		t.Fatalf("offering id %q, fee %d, want signed and the sum %d", o.ID, o.Fee().Minor, sum)
	}

	v := e.buy("team-a", o.ID, "ws-1")
	if len(v.Series.Occurrences) != 10 || v.State != core.SeriesScheduled || v.Series.Fee.Minor != sum {
		t.Fatalf("bought %d occurrences, state %s, fee %d; want 10, scheduled, %d", len(v.Series.Occurrences), v.State, v.Series.Fee.Minor, sum)
	}
	for i, b := range v.Series.Occurrences {
		if !b.Start.Equal(o.Occurrences[i].Start) || !b.End.Equal(o.Occurrences[i].End) || b.Team != "team-a" || b.Count != 4 {
			t.Errorf("occurrence %d: block %+v", i, b)
		}
	}
	ledger, err := e.st.Ledger(t.Context(), "team-a")
	if err != nil {
		t.Fatal(err)
	}
	var charged int64
	for _, l := range ledger {
		charged += l.Amount.Minor
	}
	if len(ledger) != 10 || charged != sum {
		t.Errorf("ledger: %d entries summing %d, want 10 summing %d", len(ledger), charged, sum)
	}
	// The same client token returns the series; the quote buys once.
	again, created, err := e.svc.PurchaseSeries(t.Context(), contract.SeriesPurchaseRequest{Team: "team-a", OfferingID: o.ID, ClientToken: "ws-1", Name: "workshop"})
	if err != nil || created || again.Series.ID != v.Series.ID {
		t.Errorf("replay: %s created %v, %v; want %s", again.Series.ID, created, err, v.Series.ID)
	}
	if _, _, err := e.svc.PurchaseSeries(t.Context(), contract.SeriesPurchaseRequest{Team: "team-a", OfferingID: o.ID, ClientToken: "ws-2"}); !errors.Is(err, core.ErrOfferingUsed) {
		t.Errorf("buying the quote again: %v, want ErrOfferingUsed", err)
	}
	// Another team does not see it.
	if _, err := e.svc.GetSeries(t.Context(), "team-b", v.Series.ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("another team's GetSeries: %v, want not found", err)
	}
	if _, err := e.svc.CancelSeries(t.Context(), "team-b", v.Series.ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("another team's CancelSeries: %v, want not found", err)
	}
	if list, err := e.svc.ListSeries(t.Context(), "team-b"); err != nil || len(list) != 0 {
		t.Errorf("another team's ListSeries: %d, %v", len(list), err)
	}
}

// TestSeriesAllOrNothingAndPartial: with Wednesday's window taken, the
// all-or-nothing quote cannot be bought and says which occurrence does
// not fit; the partial one buys the other four.
func TestSeriesAllOrNothingAndPartial(t *testing.T) {
	wed := time.Date(2027, 3, 24, 10, 0, 0, 0, time.UTC)
	e := newSeriesEnv(t, l4Block("cb-taken", "team-b", wed, wed.Add(2*time.Hour)))
	whole := e.search(workshop("team-a", 1, false))
	if whole.ID != "" {
		t.Fatalf("an all-or-nothing quote with an occurrence that does not fit was signed")
	}
	var fits []bool
	for _, oc := range whole.Occurrences {
		fits = append(fits, oc.Fits)
	}
	if diff := cmp.Diff([]bool{true, true, false, true, true}, fits); diff != "" {
		t.Fatalf("fits (-want +got):\n%s", diff)
	}
	if r := whole.Occurrences[2].Reason; !strings.Contains(r, "no capacity") {
		t.Errorf("reason %q, want no capacity", r)
	}
	if _, _, err := e.svc.PurchaseSeries(t.Context(), contract.SeriesPurchaseRequest{Team: "team-a", OfferingID: whole.ID, ClientToken: "x"}); !errors.Is(err, core.ErrOfferingInvalid) {
		t.Errorf("buying an unsigned quote: %v, want offering invalid", err)
	}

	part := e.search(workshop("team-a", 1, true))
	if part.ID == "" || len(part.Bought()) != 4 {
		t.Fatalf("partial quote: id %q, %d occurrences bought; want signed, 4", part.ID, len(part.Bought()))
	}
	v := e.buy("team-a", part.ID, "ws-part")
	var starts []string
	for _, b := range v.Series.Occurrences {
		starts = append(starts, b.Start.Format("01-02"))
	}
	if diff := cmp.Diff([]string{"03-22", "03-23", "03-25", "03-26"}, starts); diff != "" {
		t.Errorf("occurrences bought (-want +got):\n%s", diff)
	}
}

// TestSeriesBeyondLeadTime: occurrences that start beyond the booking
// horizon (8 weeks) are marked so and are not bought.
func TestSeriesBeyondLeadTime(t *testing.T) {
	e := newSeriesEnv(t)
	req := workshop("team-a", 0, true)
	req.Days, req.ToDate = []string{"mon"}, "2027-05-31" // ten Mondays
	o := e.search(req)
	horizon := seriesT0.Add(8 * 7 * 24 * time.Hour)
	for _, oc := range o.Occurrences {
		beyond := oc.Start.After(horizon)
		if oc.Fits == beyond {
			t.Errorf("occurrence %s: fits %v, beyond the horizon %v", oc.Start, oc.Fits, beyond)
		}
		if beyond && !strings.Contains(oc.Reason, "booking horizon") {
			t.Errorf("occurrence %s: reason %q", oc.Start, oc.Reason)
		}
	}
	if n := len(o.Bought()); n != 7 {
		t.Errorf("%d occurrences bought, want the 7 within the horizon (to 2027-05-10T00:00Z)", n)
	}
}

// TestSeriesCancel: cancelling one occurrence cancels its block;
// cancelling the series cancels the rest, each refunded per the policy
// (half, before its start).
func TestSeriesCancel(t *testing.T) {
	e := newSeriesEnv(t)
	o := e.search(workshop("team-a", 1, false))
	v := e.buy("team-a", o.ID, "ws-1")
	first := v.Series.Occurrences[0]
	if _, err := e.svc.CancelBlock(t.Context(), "team-a", first.ID); err != nil {
		t.Fatal(err)
	}
	got, err := e.svc.CancelSeries(t.Context(), "team-a", v.Series.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != core.SeriesCancelled {
		t.Errorf("state %s, want cancelled", got.State)
	}
	ledger, err := e.st.Ledger(t.Context(), "team-a")
	if err != nil {
		t.Fatal(err)
	}
	refunds := map[string]int64{}
	for _, l := range ledger {
		if l.Kind == core.LedgerRefund {
			refunds[l.Subject] += l.Amount.Minor
		}
	}
	for _, b := range got.Series.Occurrences {
		if b.State != core.StateCancelled || refunds[b.ID] != b.Fee.Minor/2 {
			t.Errorf("occurrence %s: %s, refunded %d, want cancelled and %d", b.ID, b.State, refunds[b.ID], b.Fee.Minor/2)
		}
	}
	if _, err := e.svc.CancelSeries(t.Context(), "team-a", v.Series.ID); !errors.Is(err, core.ErrInvalidState) {
		t.Errorf("cancelling a cancelled series: %v, want invalid state", err)
	}
}

func TestSeriesBadInput(t *testing.T) {
	e := newSeriesEnv(t)
	for name, mod := range map[string]func(*contract.SeriesSearchRequest){
		"zone":         func(r *contract.SeriesSearchRequest) { r.TimeZone = "Mars/Olympus" },
		"day":          func(r *contract.SeriesSearchRequest) { r.Days = []string{"funday"} },
		"start":        func(r *contract.SeriesSearchRequest) { r.StartTime = "9am" },
		"both ends":    func(r *contract.SeriesSearchRequest) { r.ToDate = "2027-04-01" },
		"no end":       func(r *contract.SeriesSearchRequest) { r.Weeks = 0 },
		"type":         func(r *contract.SeriesSearchRequest) { r.InstanceType = "b200.8x" },
		"count":        func(r *contract.SeriesSearchRequest) { r.Count = 0 },
		"too many":     func(r *contract.SeriesSearchRequest) { r.Weeks = 100 },
		"bad date":     func(r *contract.SeriesSearchRequest) { r.FromDate = "22/03/2027" },
		"unknown zone": func(r *contract.SeriesSearchRequest) { r.Zone = "nowhere" },
	} {
		req := workshop("team-a", 2, false)
		mod(&req)
		if _, err := e.svc.SeriesOfferings(t.Context(), req); !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid argument", name, err)
		}
	}
}
