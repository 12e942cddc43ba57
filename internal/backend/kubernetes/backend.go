package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"

	"capblock/internal/core"
)

// Backend is the Kubernetes backend. It is safe for concurrent use.
type Backend struct {
	cfg    Config
	log    *slog.Logger
	client clientset.Interface
	reader nodeReader

	factory    informers.SharedInformerFactory
	nodes      listersv1.NodeLister
	podFactory informers.SharedInformerFactory // the blocks' pods (pods.go)
	pods       cache.Indexer
	taints     workqueue.TypedRateLimitingInterface[string]
	stop       context.CancelFunc
	done       sync.WaitGroup

	mu      sync.Mutex
	skipped map[string]string // node → why the inventory leaves it out, as last logged

	// The repairs (converge.go): the desired state, the nodes to compare
	// with it, and what the fenced writes did.
	conv     converger
	drift    workqueue.TypedRateLimitingInterface[string]
	written  atomic.Int64 // patches of blocks' labels that took effect
	refused  atomic.Int64 // writes refused as older than the version recorded
	repaired atomic.Int64 // nodes repaired
}

// New connects to the cluster, starts the informer on its Nodes and the
// workers that taint the sold ones, and returns once the informer holds
// every node. Close stops them.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Backend, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("configuring the Kubernetes backend: %w", err)
	}
	rc, err := restConfig(cfg)
	if err != nil {
		return nil, err
	}
	client, err := clientset.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("making a Kubernetes client: %w", err)
	}
	// 1. One plain list first: a cluster out of reach or a role without
	// the right says so at once, instead of an informer retrying until
	// the timeout.
	sctx, cancel := context.WithTimeout(ctx, cfg.SyncTimeout)
	defer cancel()
	if _, err := client.CoreV1().Nodes().List(sctx, metav1.ListOptions{Limit: 1}); err != nil {
		return nil, fmt.Errorf("listing the cluster's nodes at %s: %w", rc.Host, err)
	}
	b := &Backend{
		cfg: cfg, log: log, client: client,
		reader:  nodeReader{models: cfg.GPUModels, sold: cfg.SoldModels, rackLabel: cfg.RackLabel, nodeLabels: cfg.NodeLabels},
		taints:  workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		drift:   workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		skipped: map[string]string{},
	}
	// 2. The informer, trimmed to what the backend reads; every node it
	// adds or changes is checked for the taint.
	b.factory = informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(trimNode))
	inf := b.factory.Core().V1().Nodes()
	b.nodes = inf.Lister()
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { b.checkTaint(obj); b.checkDrift(obj) },
		UpdateFunc: func(_, obj any) { b.checkTaint(obj); b.checkDrift(obj) },
	}); err != nil {
		return nil, fmt.Errorf("watching the cluster's nodes: %w", err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	b.stop = stop
	b.factory.Start(runCtx.Done())
	pods, err := b.startPods(runCtx)
	if err != nil {
		b.Close()
		return nil, err
	}
	if !cache.WaitForCacheSync(sctx.Done(), inf.Informer().HasSynced, pods.HasSynced) {
		b.Close()
		return nil, fmt.Errorf("listing the cluster's nodes and the blocks' pods at %s: not done after %v", rc.Host, cfg.SyncTimeout)
	}
	// 3. The taint workers, and the repairs' (idle until Converge), as
	// many as an action's calls in flight: a block's nodes that drift
	// together are repaired together.
	for range 4 {
		b.done.Go(func() { b.runTaints(runCtx) })
	}
	for range cfg.Parallel {
		b.done.Go(func() { b.runDrift(runCtx) })
	}
	b.done.Go(func() { b.runResync(runCtx) })
	return b, nil
}

// restConfig is the client configuration: cfg.REST, the kubeconfig file,
// or the pod's own. Its rate limit is raised from client-go's 5 a second,
// so that a block of 64 nodes is labelled in well under a second.
func restConfig(cfg Config) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	switch {
	case cfg.REST != nil:
		rc = rest.CopyConfig(cfg.REST)
	case cfg.Kubeconfig != "":
		if rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig); err != nil {
			return nil, fmt.Errorf("reading kubeconfig %s: %w", cfg.Kubeconfig, err)
		}
	default:
		if rc, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("reading the in-cluster configuration (outside a pod, give a kubeconfig): %w", err)
		}
	}
	if rc.QPS == 0 {
		rc.QPS, rc.Burst = 100, 200
	}
	rc.UserAgent = "capblock"
	return rc, nil
}

// Close stops the informer, the taint workers and the repairs.
func (b *Backend) Close() {
	b.taints.ShutDown()
	b.drift.ShutDown()
	b.stop()
	b.factory.Shutdown()
	if b.podFactory != nil {
		b.podFactory.Shutdown()
	}
	b.done.Wait()
}

// Name returns "kubernetes".
func (b *Backend) Name() string { return "kubernetes" }

// Inventory reports the sold nodes from the informer's cache, sorted by
// name: those with nvidia.com/gpu, a GPU product that maps to a model
// and a zone. Each other GPU node is logged once (again if its reason
// changes). It reads no API: the leader calls it at every poll.
func (b *Backend) Inventory(context.Context) ([]core.Node, error) {
	all, err := b.nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing nodes from the cache: %w", err)
	}
	out := make([]core.Node, 0, len(all))
	skipped := map[string]string{}
	for _, n := range all {
		node, why, notable := b.reader.read(n)
		if why != "" {
			if notable {
				skipped[n.Name] = why
			}
			continue
		}
		out = append(out, node)
	}
	b.logSkipped(skipped)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// logSkipped logs the GPU nodes left out that were not left out for the
// same reason at the last call.
func (b *Backend) logSkipped(skipped map[string]string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, why := range skipped {
		if b.skipped[name] != why {
			b.log.Warn("a GPU node of the cluster is not sold", "node", name, "reason", why)
		}
	}
	b.skipped = skipped
}

// NodeHealth reports, from the informer's cache, each sold node that is
// NotReady, cordoned, or short of GPUs, with the reason. A deleted node
// is not reported: it is gone from the inventory.
func (b *Backend) NodeHealth(context.Context) ([]core.NodeHealth, error) {
	all, err := b.nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing nodes from the cache: %w", err)
	}
	var out []core.NodeHealth
	for _, n := range all {
		if _, why, _ := b.reader.read(n); why != "" {
			continue
		}
		if reason := unhealthyReason(n); reason != "" {
			out = append(out, core.NodeHealth{Node: n.Name, Health: core.Unhealthy, Reason: reason, Source: core.HealthFromEngine})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, nil
}

// sold reports whether the inventory reports n.
func (b *Backend) sold(n *corev1.Node) bool {
	_, why, _ := b.reader.read(n)
	return why == ""
}
