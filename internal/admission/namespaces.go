package admission

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// PolicyRules are what admission reads on the cluster, for the
// ClusterRole of capblock's ServiceAccount beside the backend's
// (kubernetes.PolicyRules): the namespaces' labels.
func PolicyRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
	}
}

// NamespaceCache reads namespaces' labels from an informer. A namespace
// that the cache lacks, or whose team label it lacks, is read from the
// API (a namespace made or labelled a moment ago), at most a few times a
// second, so that a flood of such reviews cannot flood the API server.
type NamespaceCache struct {
	client  clientset.Interface
	lister  listersv1.NamespaceLister
	factory informers.SharedInformerFactory
	stop    context.CancelFunc
	reads   *rate.Limiter
}

// NewNamespaceCache starts the informer and returns once it holds every
// namespace, or fails after timeout. Close stops it.
func NewNamespaceCache(ctx context.Context, rc *rest.Config, timeout time.Duration) (*NamespaceCache, error) {
	client, err := clientset.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("making a Kubernetes client: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A plain list first: a role without the right says so at once.
	if _, err := client.CoreV1().Namespaces().List(sctx, metav1.ListOptions{Limit: 1}); err != nil {
		return nil, fmt.Errorf("listing the cluster's namespaces at %s: %w", rc.Host, err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(trimNamespace))
	inf := factory.Core().V1().Namespaces()
	c := &NamespaceCache{client: client, lister: inf.Lister(), factory: factory, reads: rate.NewLimiter(5, 10)}
	inf.Informer() // registered before Start, so that Start runs it
	runCtx, stop := context.WithCancel(context.Background())
	c.stop = stop
	factory.Start(runCtx.Done())
	if !cache.WaitForCacheSync(sctx.Done(), inf.Informer().HasSynced) {
		c.Close()
		return nil, fmt.Errorf("listing the cluster's namespaces at %s: not done after %v", rc.Host, timeout)
	}
	return c, nil
}

// Close stops the informer.
func (c *NamespaceCache) Close() {
	c.stop()
	c.factory.Shutdown()
}

// Labels returns the labels of namespace name; none for a namespace that
// does not exist.
func (c *NamespaceCache) Labels(ctx context.Context, name string) (map[string]string, error) {
	ns, err := c.lister.Get(name)
	switch {
	case err == nil && ns.Labels[TeamLabel] != "":
		return ns.Labels, nil
	case err != nil && !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading namespace %s from the cache: %w", name, err)
	case !c.reads.Allow():
		if ns != nil {
			return ns.Labels, nil
		}
		return nil, nil
	}
	fresh, err := c.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading namespace %s: %w", name, err)
	}
	return fresh.Labels, nil
}

// trimNamespace keeps of a namespace what Labels reads.
func trimNamespace(obj any) (any, error) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns.Name, Labels: ns.Labels, ResourceVersion: ns.ResourceVersion, DeletionTimestamp: ns.DeletionTimestamp,
	}}, nil
}
