package kubernetes_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"capblock/internal/backend/kubernetes"
	"capblock/internal/kubetest"
)

// BenchmarkBlock64 times, on a local cluster of 64 eight-GPU nodes, the
// backend's start (its first list of the nodes) and a 64-node block's
// activation and release (every node labelled, then unlabelled).
// DESIGN.md's target: a 64-node block's nodes labelled ≤ 1 s.
func BenchmarkBlock64(b *testing.B) {
	c := kubetest.Start(b, kubetest.Options{})
	nodes, err := c.AddGPUNodes(b.Context(), 64, 8, "zone-a", nil)
	if err != nil {
		b.Fatal(err)
	}
	cfg := kubernetes.Config{REST: c.AdminConfig()}
	b.Run("new", func(b *testing.B) {
		for b.Loop() {
			be, err := kubernetes.New(b.Context(), cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			be.Close()
		}
	})
	be, err := kubernetes.New(b.Context(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	b.Run("activate-release", func(b *testing.B) {
		var activate, release time.Duration
		i := 0
		for b.Loop() {
			i++
			blk := block(fmt.Sprintf("cb-bench-%d", i), "team-a", nodes...)
			start := time.Now()
			if err := be.Activate(b.Context(), blk); err != nil {
				b.Fatal(err)
			}
			activate += time.Since(start)
			start = time.Now()
			if err := be.Release(b.Context(), blk); err != nil {
				b.Fatal(err)
			}
			release += time.Since(start)
		}
		b.ReportMetric(float64(activate.Microseconds())/1000/float64(i), "ms/activate")
		b.ReportMetric(float64(release.Microseconds())/1000/float64(i), "ms/release")
	})
}
