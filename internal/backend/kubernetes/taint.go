package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// checkTaint queues a sold node that lacks the taint. The informer calls
// it for every node at its first list (so every sold node is tainted at
// start) and for every node added or changed afterwards (a new node, a
// node whose GPUs or labels now make it sold, a taint removed by hand).
func (b *Backend) checkTaint(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok || n.DeletionTimestamp != nil {
		return
	}
	if b.sold(n) && !hasTaint(n, b.cfg.Taint) {
		b.taints.Add(n.Name)
	}
}

// runTaints taints the queued nodes until the queue shuts down; a failed
// patch is tried again after a growing pause.
func (b *Backend) runTaints(ctx context.Context) {
	for {
		name, shutdown := b.taints.Get()
		if shutdown {
			return
		}
		if err := b.taint(ctx, name); err != nil {
			if ctx.Err() == nil {
				b.log.Warn("tainting a sold node; trying again", "node", name, "taint", taintString(b.cfg.Taint), "err", err)
			}
			b.taints.AddRateLimited(name)
		} else {
			b.taints.Forget(name)
		}
		b.taints.Done(name)
	}
}

// taint puts the taint on node name as the cache last saw it. The patch
// replaces the node's whole list of taints (Kubernetes keeps it as one
// value), so it carries the node's resourceVersion: if the node changed
// since, the API refuses it and the node is taken again from a fresher
// cache.
func (b *Backend) taint(ctx context.Context, name string) error {
	n, err := b.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !b.sold(n) || hasTaint(n, b.cfg.Taint) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": n.ResourceVersion},
		"spec":     map[string]any{"taints": withTaint(n.Spec.Taints, b.cfg.Taint)},
	})
	if err != nil {
		return fmt.Errorf("encoding the taint: %w", err)
	}
	_, err = b.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("patching node %s: %w", name, err)
	}
	b.log.Info("tainted a sold node", "node", name, "taint", taintString(b.cfg.Taint))
	return nil
}

// fieldManager names capblock's changes in the objects' managed fields.
const fieldManager = "capblock"

func taintString(t corev1.Taint) string {
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}
