package service

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// TestPurchaseMetrics: capblock_purchases_total counts each purchase once,
// by kind and outcome: bought, replayed under its client token, and the
// reasons of refusals (an offering that is no quote, the same token with
// other terms, a quote that already bought a block).
func TestPurchaseMetrics(t *testing.T) {
	ctx := t.Context()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	svc, team := demoService(t, now, func(st store.Full) store.Full { return st })
	offs, err := svc.Offerings(ctx, core.SearchRequest{Types: []string{"h100.8x"}, Count: 1, Duration: 4 * time.Hour, Zone: "zone-a",
		StartAfter: now, EndBefore: now.Add(24 * time.Hour), Team: team})
	if err != nil || len(offs) < 2 {
		t.Fatalf("searching: %v %v", offs, err)
	}
	buy := func(offering, token string) {
		t.Helper()
		_, _, _ = svc.Purchase(ctx, contract.PurchaseRequest{Team: team, OfferingID: offering, ClientToken: token})
	}
	buy(offs[0].ID, "tok-1")     // bought
	buy(offs[0].ID, "tok-1")     // replayed
	buy(offs[1].ID, "tok-1")     // the token bought other terms
	buy(offs[0].ID, "tok-2")     // the quote bought a block already
	buy("cbo-not-a-quote", "t3") // no offering

	reg := prometheus.NewRegistry()
	reg.MustRegister(svc.Collectors()...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "capblock_purchases_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			got[labels["kind"]+" "+labels["outcome"]] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{
		"block bought":               1,
		"block replayed":             1,
		"block idempotency_mismatch": 1,
		"block offering_used":        1,
		"block offering_invalid":     1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("capblock_purchases_total (-want +got):\n%s", diff)
	}
}

// TestPurchaseOutcome: errors that are no domain refusal are internal,
// wrapped refusals keep their reason.
func TestPurchaseOutcome(t *testing.T) {
	tests := map[string]struct {
		created bool
		err     error
		want    string
	}{
		"bought":   {created: true, want: "bought"},
		"replayed": {want: "replayed"},
		"budget":   {err: core.ErrBudgetExceeded, want: "budget_exceeded"},
		"wrapped":  {err: fmt.Errorf("buying: %w", core.ErrNoCapacity), want: "no_capacity"},
		"store":    {err: errors.New("committing: disk I/O error"), want: "internal"},
	}
	for name, tc := range tests {
		if got := purchaseOutcome(tc.created, tc.err); got != tc.want {
			t.Errorf("%s: outcome %q, want %q", name, got, tc.want)
		}
	}
}
