package service

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// TestFleetMetrics scrapes /metrics after a purchase of 2 h100.8x that
// became active, the failure of one of its nodes (the block moved to
// another), a running job and three webhook deliveries (one delivered,
// one failing, one given up on), and checks what the fleet's gauges say.
func TestFleetMetrics(t *testing.T) {
	ctx := t.Context()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	svc, team := demoService(t, now, func(st store.Full) store.Full { return st })

	// 1. A block of 2 h100.8x in zone-a, active from +1h.
	offs, err := svc.Offerings(ctx, core.SearchRequest{Types: []string{"h100.8x"}, Count: 2, Duration: 4 * time.Hour, Zone: "zone-a",
		StartAfter: now, EndBefore: now.Add(6 * time.Hour), Team: team})
	if err != nil || len(offs) == 0 {
		t.Fatalf("searching: %v %v", offs, err)
	}
	b, _, err := svc.Purchase(ctx, contract.PurchaseRequest{Team: team, OfferingID: offs[0].ID, ClientToken: "tok-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.clock.(interface {
		Advance(time.Duration) (time.Time, error)
	}).Advance(90 * time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	// 2. One of its nodes fails: it gets another.
	if _, err := svc.FailNode(ctx, b.Placements[0].Node, "test"); err != nil {
		t.Fatal(err)
	}
	// 3. A running job, and webhook deliveries.
	job := core.Job{ID: "job-1", Name: "train", Team: team, BlockID: b.ID, Command: []string{"true"}, InstanceCount: 1,
		State: core.JobRunning, CreatedAt: now, StartedAt: now.Add(90 * time.Minute), Run: 1}
	if err := svc.store.Commit(ctx, store.Change{Jobs: []store.JobWrite{{Job: job}}}); err != nil {
		t.Fatal(err)
	}
	if err := svc.store.CreateWebhook(ctx, core.Webhook{ID: "wh-1", Team: team, URL: "https://example.com/h", Events: []string{"*"}, Secret: "s", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	for i, d := range []core.Delivery{
		{EventSeq: 1, Attempt: 1, Status: 200, Done: true},
		{EventSeq: 2, Attempt: 1, Status: 500, Error: "status 500", NextAt: now.Add(2 * time.Hour)},
		{EventSeq: 3, Attempt: 8, Error: "no answer; gave up after 8 attempts", Done: true},
	} {
		d.ID, d.Webhook, d.EventID, d.Time = "whd-"+string(rune('a'+i)), "wh-1", "evt-"+string(rune('a'+i)), now
		if err := svc.store.AppendDelivery(ctx, d); err != nil {
			t.Fatal(err)
		}
	}

	// 4. Scrape.
	reg := prometheus.NewRegistry()
	reg.MustRegister(svc.Collectors()...)
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	got := rec.Body.String()
	lines := map[string]bool{}
	for _, l := range strings.Split(got, "\n") {
		lines[l] = true
	}
	for _, want := range []string{
		`capblock_blocks{state="active"} 1`,
		`capblock_blocks{state="scheduled"} 0`,
		`capblock_blocks{state="payment-pending"} 0`,
		// zone-a has 32 H100 nodes of 8 GPUs: 16 booked, 8 unhealthy.
		`capblock_pool_gpus{gpu_model="H100",zone="zone-a"} 256`,
		`capblock_pool_gpus_booked{gpu_model="H100",zone="zone-a"} 16`,
		`capblock_pool_gpus_unhealthy{gpu_model="H100",zone="zone-a"} 8`,
		`capblock_pool_gpus_free{gpu_model="H100",zone="zone-a"} 232`,
		// The block moved off the failed node: nothing booked stays on it.
		`capblock_pool_gpus_unhealthy_booked{gpu_model="H100",zone="zone-a"} 0`,
		`capblock_pool_gpus_booked{gpu_model="H100",zone="zone-b"} 0`,
		`capblock_pool_gpus_free{gpu_model="H100",zone="zone-b"} 256`,
		`capblock_jobs_running 1`,
		`capblock_webhook_deliveries_failing 1`,
		`capblock_webhook_deliveries_failed 1`,
		// The block's 16 GPUs for the 30 minutes since its start; the job
		// has no stored runs (no events), so nothing is used.
		`capblock_gpu_hours{kind="reserved",team="` + team + `"} 8`,
		`capblock_gpu_hours{kind="used",team="` + team + `"} 0`,
		`capblock_gpu_hours{kind="lent",team="` + team + `"} 0`,
		`capblock_gpu_hours{kind="idle",team="` + team + `"} 8`,
	} {
		if !lines[want] {
			t.Errorf("/metrics lacks the line %q", want)
		}
	}
	for _, name := range []string{"capblock_blocks", "capblock_pool_gpus", "capblock_pool_gpus_booked", "capblock_pool_gpus_free",
		"capblock_pool_gpus_unhealthy", "capblock_pool_gpus_unhealthy_booked", "capblock_jobs_running", "capblock_webhook_deliveries_failing", "capblock_webhook_deliveries_failed",
		"capblock_gpu_hours"} {
		if !strings.Contains("\n"+got, "\n# HELP "+name+" ") {
			t.Errorf("/metrics has no HELP for %s", name)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", got)
	}
}
