package kubernetes

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"capblock/internal/backend"
	"capblock/internal/core"
)

// The blocks' pods: every pod whose PodBlockLabel names a block, in any
// namespace (capblock's jobs and the teams' own), held by an informer
// trimmed to what the backend reads and indexed by block. Terminate and
// Release read them from it, not from the API.
//
// A pod created just before its block's release may reach the cache
// after the release read it: the repairs then delete it, once the
// leader's desired state no longer names its block (for
// backend.UnknownGrace), as they remove a label. A pod of a block the
// desired state names, of a node the inventory does not sell, or not
// bound to a node is left alone.

// blockIndex indexes the blocks' pods by the block's label value.
const blockIndex = "block"

// startPods starts the informer of the blocks' pods on ctx; New waits
// for its first list.
func (b *Backend) startPods(ctx context.Context) (cache.SharedIndexInformer, error) {
	b.podFactory = informers.NewSharedInformerFactoryWithOptions(b.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = b.cfg.PodBlockLabel }),
		informers.WithTransform(b.trimBlockPod))
	inf := b.podFactory.Core().V1().Pods().Informer()
	label := b.cfg.PodBlockLabel
	if err := inf.AddIndexers(cache.Indexers{blockIndex: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Labels[label] != "" {
			return []string{p.Labels[label]}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("indexing the blocks' pods: %w", err)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    b.checkPod,
		UpdateFunc: func(_, obj any) { b.checkPod(obj) },
	}); err != nil {
		return nil, fmt.Errorf("watching the blocks' pods: %w", err)
	}
	b.pods = inf.GetIndexer()
	b.podFactory.Start(ctx.Done())
	return inf, nil
}

// trimBlockPod keeps of a pod what the backend reads.
func (b *Backend) trimBlockPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a deletion's tombstone
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: map[string]string{b.cfg.PodBlockLabel: p.Labels[b.cfg.PodBlockLabel]}, DeletionTimestamp: p.DeletionTimestamp},
		Spec: corev1.PodSpec{NodeName: p.Spec.NodeName},
	}, nil
}

// blockPods lists the block's pods that are not already leaving, from
// the cache.
func (b *Backend) blockPods(_ context.Context, blk core.Block) ([]podRef, error) {
	objs, err := b.pods.ByIndex(blockIndex, labelSafe(blk.ID))
	if err != nil {
		return nil, fmt.Errorf("listing the pods of block %s from the cache: %w", blk.ID, err)
	}
	var out []podRef
	for _, obj := range objs {
		if p, ok := obj.(*corev1.Pod); ok && p.DeletionTimestamp == nil {
			out = append(out, podRef{namespace: p.Namespace, name: p.Name, node: p.Spec.NodeName, uid: p.UID})
		}
	}
	return out, nil
}

// podKey is a pod's key in the repairs' queue, apart from the nodes'.
func podKey(namespace, name string) string { return "pod:" + namespace + "/" + name }

// checkPod queues a pod of a block that the informer added or changed.
func (b *Backend) checkPod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.DeletionTimestamp != nil || p.Spec.NodeName == "" || b.currentView() == nil {
		return
	}
	b.drift.Add(podKey(p.Namespace, p.Name))
}

// repairPod deletes the pod of key when the block it names is over:
// unknown to the desired state for backend.UnknownGrace, on a sold node.
// again, when not zero, is when to look at it again.
func (b *Backend) repairPod(ctx context.Context, v *view, key string) (again time.Duration, err error) {
	obj, exists, err := b.pods.GetByKey(key[len("pod:"):])
	if err != nil || !exists {
		return 0, err
	}
	p, ok := obj.(*corev1.Pod)
	if !ok || p.DeletionTimestamp != nil || p.Spec.NodeName == "" {
		return 0, nil
	}
	label := b.labelPrefix() + p.Labels[b.cfg.PodBlockLabel]
	if _, live := v.live[label]; live || v.unsettled[label] {
		b.known(label)
		return 0, nil
	}
	node, err := b.nodes.Get(p.Spec.NodeName)
	if err != nil || !b.sold(node) {
		return 0, nil // not capblock's node: not its pod to repair
	}
	if wait := b.unknownFor(label, time.Now()); wait > 0 {
		return wait, nil
	}
	uid := p.UID
	err = b.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case err == nil:
		b.repaired.Add(1)
		b.log.Info("deleted a pod of a block that is over", "pod", p.Namespace+"/"+p.Name, "block", p.Labels[b.cfg.PodBlockLabel], "node", p.Spec.NodeName)
		return 0, nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return 0, nil
	default:
		return 0, fmt.Errorf("deleting pod %s/%s: %w", p.Namespace, p.Name, err)
	}
}

var _ backend.Converger = (*Backend)(nil)
