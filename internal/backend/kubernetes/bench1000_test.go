package kubernetes_test

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientset "k8s.io/client-go/kubernetes"

	"capblock/internal/backend"
	"capblock/internal/backend/kubernetes"
	"capblock/internal/core"
	"capblock/internal/kubetest"
)

// BenchmarkCluster1000 times, on a local cluster of 1,000 eight-GPU KWOK
// nodes in two zones, the two targets of the Kubernetes backend:
//
//	discovery   from New to an Inventory of all 1,000 nodes (≤ 3 s)
//	activate64  from a 64-node block's Activate to all 64 nodes seen
//	            labelled by a watch on the block's label (≤ 1 s)
//	drift64     from the removal by hand of an active block's label from
//	            its 64 nodes, all at once, to all 64 seen labelled again
//	            by the backend's repairs (≤ 2 s)
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

	b.Run("drift64", func(b *testing.B) {
		be, err := kubernetes.New(b.Context(), cfg, log)
		if err != nil {
			b.Fatal(err)
		}
		defer be.Close()
		blk := block("cb-drift", "team-a", nodes[:64]...)
		blk.Version = 1
		key := kubernetes.DefaultBlockLabelDomain + "/" + blk.ID
		be.Converge(&backend.Desired{Epoch: 1, Blocks: []core.Block{blk}})
		defer be.Converge(nil)
		fast := c.AdminConfig()
		fast.QPS, fast.Burst = 1000, 1000 // the drift itself must not wait on the client's limit
		hand := clientset.NewForConfigOrDie(fast)
		waitLabelled := func(w watch.Interface, drifted map[string]bool) {
			labelled := map[string]bool{}
			for len(labelled) < 64 {
				select {
				case ev := <-w.ResultChan():
					n, ok := ev.Object.(*corev1.Node)
					if !ok {
						continue
					}
					switch ev.Type {
					case watch.Deleted:
						delete(labelled, n.Name)
						drifted[n.Name] = true
					case watch.Added, watch.Modified:
						if drifted == nil || drifted[n.Name] {
							labelled[n.Name] = true
						}
					}
				case <-time.After(30 * time.Second):
					b.Fatalf("%d of the 64 nodes labelled again in 30 s", len(labelled))
				}
			}
		}
		w, err := admin.CoreV1().Nodes().Watch(b.Context(), metav1.ListOptions{LabelSelector: key})
		if err != nil {
			b.Fatal(err)
		}
		waitLabelled(w, nil) // the repairs label them a first time
		w.Stop()
		remove := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, key))
		var took []time.Duration
		for b.Loop() {
			w, err := admin.CoreV1().Nodes().Watch(b.Context(), metav1.ListOptions{LabelSelector: key})
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			var wg sync.WaitGroup
			for _, name := range nodes[:64] {
				wg.Go(func() {
					if _, err := hand.CoreV1().Nodes().Patch(b.Context(), name, types.MergePatchType, remove, metav1.PatchOptions{}); err != nil {
						b.Error(err)
					}
				})
			}
			wg.Wait()
			waitLabelled(w, map[string]bool{})
			took = append(took, time.Since(start))
			w.Stop()
		}
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
