package service

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"capblock/internal/clock"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store/sqlite"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// changesPerCommit is the mean size of the store's commit groups so far
// (the histogram capblock_store_commit_group_changes).
func changesPerCommit(b *testing.B, cs []prometheus.Collector) float64 {
	for _, c := range cs {
		ch := make(chan prometheus.Metric, 1)
		go func() { c.Collect(ch); close(ch) }()
		for m := range ch {
			var d dto.Metric
			if err := m.Write(&d); err != nil {
				b.Fatal(err)
			}
			if h := d.GetHistogram(); h != nil && h.GetSampleCount() > 0 {
				return h.GetSampleSum() / float64(h.GetSampleCount())
			}
		}
	}
	return 0
}

// BenchmarkPurchase measures durable purchases per second on SQLite: the
// whole use case (idempotency look-up, offering check, placement, one
// transaction with the block, its allocation rows, the used offering,
// the charge and the events, fsync on commit), without HTTP, by 1, 8 and
// 64 buyers at once (purchases made together share a transaction:
// store/sqlite/groupcommit.go). A quote buys once, so each purchase has
// its own, searched before the timer starts: the search is not part of
// what is measured.
func BenchmarkPurchase(b *testing.B) {
	for _, buyers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("buyers=%d", buyers), func(b *testing.B) { runPurchases(b, buyers) })
	}
}

// BenchmarkPurchaseTracing is BenchmarkPurchase's 8 buyers with tracing
// off (as serve runs without OTEL_*) and on, every purchase sampled,
// its spans (the decision's and the commit's) batched to an exporter
// that drops them: what tracing costs a purchase, the export aside.
func BenchmarkPurchaseTracing(b *testing.B) {
	b.Run("tracing=off", func(b *testing.B) { runPurchases(b, 8) })
	b.Run("tracing=on", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
			sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		prev := otel.GetTracerProvider()
		otel.SetTracerProvider(tp)
		defer func() {
			otel.SetTracerProvider(prev)
			_ = tp.Shutdown(context.Background())
		}()
		runPurchases(b, 8)
	})
}

// runPurchases is one run of BenchmarkPurchase with buyers at once.
func runPurchases(b *testing.B, buyers int) {
	b.ReportAllocs()
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	f := core.Fleet{Currency: "USD", Limits: core.DefaultLimits(), Pricing: core.DefaultPricing(),
		Types: []core.InstanceType{{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: core.Money{Minor: 9832, Currency: "USD"}}}}
	for i := range 1000 {
		f.Nodes = append(f.Nodes, core.Node{Name: fmt.Sprintf("n%04d", i), Zone: "z", Rack: fmt.Sprintf("r%02d", i/32), GPUModel: "H100", GPUs: 8, Health: core.Healthy})
	}
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	svc, err := New(ctx, Config{Fleet: f, Store: st, Clock: clock.NewSim(now), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	// Purchase i buys at the i-th of the start hours, every other
	// hour over 8 weeks (1,000 nodes each), round and round.
	var hours []time.Time
	for h := 1; h < 8*7*24-2; h += 2 {
		hours = append(hours, now.Add(time.Duration(h)*time.Hour))
	}
	offers := make([]string, b.N)
	for i := range offers {
		s := hours[i%len(hours)]
		os, err := svc.Offerings(ctx, core.SearchRequest{Types: []string{"h100.8x"}, Count: 1, Duration: time.Hour, StartAfter: s, EndBefore: s.Add(time.Hour), MaxResults: 1})
		if err != nil || len(os) == 0 {
			b.Fatalf("offering at %s: %v", s, err)
		}
		offers[i] = os[0].ID
	}
	b.ResetTimer()
	start := time.Now()
	var (
		seq atomicCounter
		wg  sync.WaitGroup
	)
	for range buyers {
		wg.Go(func() {
			for i := seq.next(); i < b.N; i = seq.next() {
				_, _, err := svc.Purchase(ctx, contract.PurchaseRequest{Team: "t", OfferingID: offers[i], ClientToken: fmt.Sprintf("tok-%d", i)})
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "purchases/s")
	b.ReportMetric(changesPerCommit(b, st.Collectors()), "changes/commit")
}
