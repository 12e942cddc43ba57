package kubernetes

import (
	"fmt"
	"log/slog"
	"testing"

	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// BenchmarkInventory1000 reads the inventory and the health of 1,000 GPU
// nodes from an informer's store, as the leader does at every poll.
func BenchmarkInventory1000(b *testing.B) {
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for i := range 1000 {
		n := makeNode(fmt.Sprintf("gpu-%04d", i), 8).label(DefaultRackLabel, fmt.Sprintf("r%d", i/16)).obj()
		if err := store.Add(n); err != nil {
			b.Fatal(err)
		}
	}
	be := &Backend{log: slog.New(slog.DiscardHandler), nodes: listersv1.NewNodeLister(store), skipped: map[string]string{},
		reader: nodeReader{models: []ModelPattern{{"NVIDIA-H100*", "H100"}}, rackLabel: DefaultRackLabel, nodeLabels: []string{GPUProductLabel}}}
	for b.Loop() {
		nodes, err := be.Inventory(b.Context())
		if err != nil || len(nodes) != 1000 {
			b.Fatalf("Inventory: %d nodes, %v", len(nodes), err)
		}
		if _, err := be.NodeHealth(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}
