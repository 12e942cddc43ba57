package admission

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"capblock/internal/kubetest"
)

// TestNamespaceCacheReadsWhatItLacks: a namespace that the cache lacks,
// or whose team it lacks, is read from the API server, as long as the
// reads' budget lasts; then the cache's answer stands.
func TestNamespaceCacheReadsWhatItLacks(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{})
	ctx := t.Context()
	cs := clientset.NewForConfigOrDie(c.AdminConfig())
	for name, team := range map[string]string{"fresh": "team-a", "relabelled": "team-b", "known": "team-c"} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{TeamLabel: team}}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A cache that has not seen "fresh", has "relabelled" before its
	// label, and has "known" with a team its API object no longer says.
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "relabelled", Labels: map[string]string{"owner": "b"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "known", Labels: map[string]string{TeamLabel: "team-old"}}},
	} {
		if err := idx.Add(ns); err != nil {
			t.Fatal(err)
		}
	}
	nc := &NamespaceCache{client: cs, lister: listersv1.NewNamespaceLister(idx), reads: rate.NewLimiter(0, 2)}
	team := func(name string) string {
		t.Helper()
		labels, err := nc.Labels(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return labels[TeamLabel]
	}
	got := []string{
		team("known"),      // the cache's team: no read
		team("fresh"),      // read: 1 of 2
		team("relabelled"), // read: 2 of 2
		team("relabelled"), // the budget is spent: the cache's answer
		team("nowhere"),    // neither
	}
	want := []string{"team-old", "team-a", "team-b", "", ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("teams (-want +got):\n%s", diff)
	}
}
