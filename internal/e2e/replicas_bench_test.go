package e2e

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkReplicaPurchases measures purchases per second through the
// HTTP API of 1 and of 3 replicas on one PostgreSQL, 16 clients spread
// over the replicas, each purchase one h100.8x for an hour (8 allocation
// rows, the charge, 2 events, in one transaction). Everything runs on
// this machine: the replicas, PostgreSQL and the clients share its cores.
func BenchmarkReplicaPurchases(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			_, rs := startReplicas(b, n)
			// Offerings at many hours, each good for 32 purchases per zone.
			var offers []string
			for h := 1; len(offers) < b.N/32+2; h++ {
				s := t0.Add(time.Duration(h) * time.Hour)
				var out struct{ Offerings []offering }
				call(b, rs[0].url, "GET", "/v1/offerings?"+searchQuery("h100.8x", 1, 1, s, s.Add(time.Hour)), nil, &out)
				for _, o := range out.Offerings {
					if o.DurationHours == 1 {
						offers = append(offers, o.OfferingID)
					}
				}
			}
			var next, failed atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for c := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := int(next.Add(1) - 1)
						if i >= b.N {
							return
						}
						var p problem
						code := call(b, rs[(c+i)%n].url, "POST", "/v1/blocks", map[string]any{"offeringId": offers[i%len(offers)], "clientToken": fmt.Sprintf("bench-%d", i)}, &p)
						if code != 201 {
							failed.Add(1)
							b.Logf("purchase %d: %d %s: %s", i, code, p.Code, p.Detail)
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "purchases/s")
			if f := failed.Load(); f > 0 {
				b.Fatalf("%d of %d purchases failed", f, b.N)
			}
		})
	}
}
