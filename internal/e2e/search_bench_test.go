package e2e

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkSearchUnderPurchases measures the offering search through the
// HTTP API of one server (the embedded default, SQLite) alone, then while
// 8 clients buy about 400 blocks a second, in one run, and reports the
// p50 and p99 of each and the ratio of the p99s. A search should never
// wait for a purchase's commit: the target is a loaded p99 at most twice
// the p99 alone. Each op is one search (8 × h100.8x for 48 h in a
// two-week window); the buyers each search a quote of their own and buy
// one l4.1x for 1 to 4 hours at a random start over 8 weeks.
func BenchmarkSearchUnderPurchases(b *testing.B) {
	if testing.Short() {
		b.Skip("builds and runs the server binary")
	}
	dir := b.TempDir()
	p := startProcess(b, buildBinary(b), filepath.Join(dir, "capblock.db"), ts(t0))
	useToken(b, p.url, filepath.Join(dir, "admin.token"))
	tok, _ := tokens.Load(p.url)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	query := "/v1/offerings?" + searchQuery("h100.8x", 8, 48, t0.Add(time.Hour), t0.Add(15*24*time.Hour))
	search := func() time.Duration {
		req, _ := http.NewRequest("GET", p.url+query, nil)
		req.Header.Set("Authorization", "Bearer "+tok.(string))
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("search: %v %v", resp, err)
		}
		drain(resp)
		return time.Since(start)
	}
	for range 50 {
		search() // warm up
	}
	b.ResetTimer()
	alone := make([]time.Duration, b.N)
	for i := range alone {
		alone[i] = search()
	}
	// The same searches while the buyers run.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var bought, refused atomic.Int64
	const buyers, perSecond = 8, 400
	for w := range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			tick := time.NewTicker(time.Second * buyers / perSecond)
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				hours := 1 + rng.IntN(4)
				s := t0.Add(time.Duration(1+rng.IntN(8*7*24-hours)) * time.Hour)
				var out struct{ Offerings []offering }
				call(b, p.url, "GET", "/v1/offerings?"+searchQuery("l4.1x", 1, hours, s, s.Add(time.Duration(hours)*time.Hour)), nil, &out)
				if len(out.Offerings) == 0 {
					refused.Add(1)
					continue
				}
				if code := call(b, p.url, "POST", "/v1/blocks", map[string]any{"offeringId": out.Offerings[0].OfferingID,
					"clientToken": fmt.Sprintf("load-%d-%d", w, n)}, nil); code == 201 {
					bought.Add(1)
				} else {
					refused.Add(1)
				}
			}
		}()
	}
	time.Sleep(500 * time.Millisecond) // the load is on
	loadStart, boughtBefore := time.Now(), bought.Load()
	loaded := make([]time.Duration, b.N)
	for i := range loaded {
		loaded[i] = search()
	}
	rate := float64(bought.Load()-boughtBefore) / time.Since(loadStart).Seconds()
	close(stop)
	wg.Wait()
	b.StopTimer()
	p50a, p99a := percentile(alone, 50), percentile(alone, 99)
	p50l, p99l := percentile(loaded, 50), percentile(loaded, 99)
	b.ReportMetric(float64(p50a.Microseconds())/1000, "p50-alone-ms")
	b.ReportMetric(float64(p99a.Microseconds())/1000, "p99-alone-ms")
	b.ReportMetric(float64(p50l.Microseconds())/1000, "p50-loaded-ms")
	b.ReportMetric(float64(p99l.Microseconds())/1000, "p99-loaded-ms")
	b.ReportMetric(float64(p99l)/float64(p99a), "p99-ratio")
	b.ReportMetric(rate, "purchases/s")
	b.Logf("%d bought, %d refused (no capacity or no quote)", bought.Load(), refused.Load())
}

// percentile is the q-th percentile of ds (sorted in place).
func percentile(ds []time.Duration, q int) time.Duration {
	slices.Sort(ds)
	return ds[min(len(ds)-1, len(ds)*q/100)]
}

func drain(resp *http.Response) {
	buf := make([]byte, 4096)
	for {
		if _, err := resp.Body.Read(buf); err != nil {
			break
		}
	}
	resp.Body.Close()
}
