package kubernetes_test

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clientset "k8s.io/client-go/kubernetes"

	"capblock/internal/backend/kubernetes"
	"capblock/internal/kubetest"
)

// BenchmarkCluster1000 times, on a local cluster of 1,000 eight-GPU KWOK
// nodes in two zones, the two targets of the Kubernetes backend:
//
//	discovery   from New to an Inventory of all 1,000 nodes (≤ 3 s)
//	activate64  from a 64-node block's Activate to all 64 nodes seen
//	            labelled by a watch on the block's label (≤ 1 s)
//
// Each activation is of a new block on the same 64 nodes, by a backend
// made for it and released after (neither is timed): the backend's
// client allows 100 requests a second with a burst of 200, and a server
// that activates one block at a time starts each with the burst whole.
// Back to back, with the releases between them, activations would
// measure that rate instead (about 0.75 s for 64 patches).
func BenchmarkCluster1000(b *testing.B) {
	c := kubetest.Start(b, kubetest.Options{})
	start := time.Now()
	var nodes []string
	for _, zone := range []string{"zone-a", "zone-b"} {
		for range 5 {
			added, err := c.AddGPUNodes(b.Context(), 100, 8, zone, nil)
			if err != nil {
				b.Fatal(err)
			}
			nodes = append(nodes, added...)
		}
	}
	b.Logf("1,000 nodes Ready in %v", time.Since(start).Round(time.Millisecond))
	cfg := kubernetes.Config{REST: c.AdminConfig()}
	log := slog.New(slog.DiscardHandler)

	b.Run("discovery", func(b *testing.B) {
		var took []time.Duration
		for b.Loop() {
			start := time.Now()
			be, err := kubernetes.New(b.Context(), cfg, log)
			if err != nil {
				b.Fatal(err)
			}
			got, err := be.Inventory(b.Context())
			if err != nil || len(got) != len(nodes) {
				b.Fatalf("the inventory has %d nodes (%v), want %d", len(got), err, len(nodes))
			}
			took = append(took, time.Since(start))
			be.Close()
		}
		reportSpread(b, took)
	})

	admin := clientset.NewForConfigOrDie(c.AdminConfig())
	b.Run("activate64", func(b *testing.B) {
		var returned time.Duration
		var took []time.Duration
		i := 0
		for b.Loop() {
			i++
			blk := block(fmt.Sprintf("cb-bench-%d", i), "team-a", nodes[:64]...)
			key := kubernetes.DefaultBlockLabelDomain + "/" + blk.ID
			b.StopTimer()
			be, err := kubernetes.New(b.Context(), cfg, log)
			if err != nil {
				b.Fatal(err)
			}
			w, err := admin.CoreV1().Nodes().Watch(b.Context(), metav1.ListOptions{LabelSelector: key})
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			start := time.Now()
			if err := be.Activate(b.Context(), blk); err != nil {
				b.Fatal(err)
			}
			returned += time.Since(start)
			seen := 0
			for seen < 64 {
				select {
				case ev := <-w.ResultChan():
					if ev.Type == watch.Added {
						seen++
					}
				case <-time.After(30 * time.Second):
					b.Fatalf("the watch saw %d of the 64 nodes labelled in 30 s", seen)
				}
			}
			took = append(took, time.Since(start))
			b.StopTimer()
			w.Stop()
			if err := be.Release(b.Context(), blk); err != nil {
				b.Fatal(err)
			}
			be.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(returned.Microseconds())/1000/float64(i), "ms/activate-returned")
		reportSpread(b, took)
	})
}

// reportSpread reports the median and the slowest of the times.
func reportSpread(b *testing.B, took []time.Duration) {
	slices.Sort(took)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(took[len(took)/2]), "ms-p50")
	b.ReportMetric(ms(took[len(took)-1]), "ms-max")
}
