package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"capblock/internal/core"
)

// blockLabel is the label that block id puts on its nodes, with its
// team as the value: block.capblock.io/<id>=<team>. One key per block,
// so that blocks that share a node (instances of fewer GPUs than a
// node's) each have theirs, and a block's release can never remove
// another's.
func (b *Backend) blockLabel(id string) string {
	return b.cfg.BlockLabelDomain + "/" + labelSafe(id)
}

// Activate labels the block's nodes with its label and unlabels the
// nodes it no longer holds (a replacement moved it off them), each write
// fenced by the block's version (converge.go). A node missing from the
// cluster is skipped: the service records it unhealthy and moves the
// block, which activates it again.
func (b *Backend) Activate(ctx context.Context, blk core.Block) error {
	nodes := placementNodes(blk)
	hold := blockWrite{id: blk.ID, team: blk.Team, version: blk.Version, hold: true}
	// 1. Label the block's nodes.
	err := each(ctx, b.cfg.Parallel, nodes, func(ctx context.Context, name string) error {
		return b.writeBlock(ctx, name, hold)
	})
	if err != nil {
		return fmt.Errorf("labelling the nodes of block %s: %w", blk.ID, err)
	}
	// 2. Unlabel the others, read from the API, not the cache: the cache
	// may not show yet the labels of an earlier activation.
	return b.unlabel(ctx, blk, nil, func(name string) bool { return !contains(nodes, name) })
}

// Terminate evicts the block's pods, through the Eviction API: each
// pod's own grace period applies, and a PodDisruptionBudget may refuse.
// A refusal is an error, so that the outbox tries again, until the
// block's end: from then on a refused pod is left to Release, which
// deletes it, so that a budget never keeps a block's nodes past its
// end (the block's release waits for its termination to be done).
func (b *Backend) Terminate(ctx context.Context, blk core.Block) error {
	pods, err := b.blockPods(ctx, blk)
	if err != nil {
		return err
	}
	err = each(ctx, b.cfg.Parallel, pods, func(ctx context.Context, p podRef) error {
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.namespace},
			DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.uid}}}
		err := b.client.PolicyV1().Evictions(p.namespace).Evict(ctx, ev)
		switch {
		case err == nil:
			b.log.Info("evicted a pod of a terminating block", "block", blk.ID, "pod", p.String(), "node", p.node)
			return nil
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			return nil // gone, or a new pod of the same name
		case apierrors.IsTooManyRequests(err) && !b.cfg.Now().Before(blk.End):
			b.log.Warn("a disruption budget refuses to evict a pod of a block that has ended; its release deletes it", "block", blk.ID, "pod", p.String())
			return nil
		default:
			return fmt.Errorf("evicting pod %s: %w", p, err)
		}
	})
	if err != nil {
		return fmt.Errorf("evicting the pods of block %s: %w", blk.ID, err)
	}
	return nil
}

// Release removes the block's label from every node that carries it,
// and records the release on every node of the block's placement too,
// so that a late activation of an older version finds it and is refused;
// then it deletes the block's pods that are left (each with its grace
// period). Another block's label is never touched.
func (b *Backend) Release(ctx context.Context, blk core.Block) error {
	if err := b.unlabel(ctx, blk, placementNodes(blk), func(string) bool { return true }); err != nil {
		return err
	}
	pods, err := b.blockPods(ctx, blk)
	if err != nil {
		return err
	}
	err = each(ctx, b.cfg.Parallel, pods, func(ctx context.Context, p podRef) error {
		err := b.client.CoreV1().Pods(p.namespace).Delete(ctx, p.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.uid}})
		switch {
		case err == nil:
			b.log.Info("deleted a pod left by a released block", "block", blk.ID, "pod", p.String(), "node", p.node)
			return nil
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			return nil
		default:
			return fmt.Errorf("deleting pod %s: %w", p, err)
		}
	})
	if err != nil {
		return fmt.Errorf("deleting the pods of block %s: %w", blk.ID, err)
	}
	return nil
}

// unlabel gives up, for the block, the nodes that carry its label and
// that drop selects, and records the release on the nodes of also.
func (b *Backend) unlabel(ctx context.Context, blk core.Block, also []string, drop func(node string) bool) error {
	key := b.blockLabel(blk.ID)
	list, err := b.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: key})
	if err != nil {
		return fmt.Errorf("listing the nodes of block %s: %w", blk.ID, err)
	}
	names := also
	for _, n := range list.Items {
		if drop(n.Name) && !contains(names, n.Name) {
			names = append(names, n.Name)
		}
	}
	give := blockWrite{id: blk.ID, team: blk.Team, version: blk.Version, at: time.Now()}
	err = each(ctx, b.cfg.Parallel, names, func(ctx context.Context, name string) error {
		return b.writeBlock(ctx, name, give)
	})
	if err != nil {
		return fmt.Errorf("unlabelling the nodes of block %s: %w", blk.ID, err)
	}
	return nil
}

// podRef names one pod of a block.
type podRef struct {
	namespace, name, node string
	uid                   types.UID
}

func (p podRef) String() string { return p.namespace + "/" + p.name }

// placementNodes are the block's nodes, each once.
func placementNodes(blk core.Block) []string {
	var out []string
	for _, pl := range blk.Placements {
		if !contains(out, pl.Node) {
			out = append(out, pl.Node)
		}
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// each calls fn on every item, at most Parallel at once, and returns
// their errors joined; it stops starting calls when ctx ends.
func each[T any](ctx context.Context, parallel int, items []T, fn func(context.Context, T) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	sem := make(chan struct{}, parallel)
	for _, it := range items {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return errors.Join(append(errs, ctx.Err())...)
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(ctx, it); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
