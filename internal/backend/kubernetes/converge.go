package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"capblock/internal/backend"
	"capblock/internal/core"
)

// Convergence and the version fence (backend/converge.go), on nodes.
//
// Each block's label on a node comes with an annotation that records the
// version of the block that capblock last wrote there:
//
//	block.capblock.io/<block>=<team>            (label, while the block holds the node)
//	version.block.capblock.io/<block>=<version> (annotation, while it holds it)
//	version.block.capblock.io/<block>=<version> released <time>
//	                                            (annotation, once it gave the node up)
//
// Every write about a block to a node (an action's or a repair's) reads
// the node, refuses to write a version older than the one recorded, and
// sends its patch with the node's resourceVersion, so that a write that
// raced with another is read again and decided again: a late activation
// of version 3 never undoes the release of version 4. The released
// annotation stays for tombstoneKept after the block left the desired
// state, then goes.
//
// While the leader hands it a desired state, the backend compares every
// node with it on each change of the node (the informer), on each new
// desired state, and every ResyncEvery, and repairs what differs: the
// labels of the blocks that hold the node, the labels in the blocks'
// domain that no block justifies. Other labels and annotations, and
// nodes the inventory does not sell, are never touched.

// tombstoneKept is how long a released block's version stays recorded on
// its nodes once the block is over, to refuse a deposed leader's late
// writes; after it, a late write is still undone by the repairs.
const tombstoneKept = time.Hour

// versionKey is the annotation that records the version of block id on
// a node.
func (b *Backend) versionKey(id string) string {
	return b.versionPrefix() + labelSafe(id)
}

func (b *Backend) versionPrefix() string { return "version." + b.cfg.BlockLabelDomain + "/" }

func (b *Backend) labelPrefix() string { return b.cfg.BlockLabelDomain + "/" }

// recorded is what a node's annotation says of one block: the version
// capblock last wrote, and whether that write gave the node up (when).
type recorded struct {
	version  int64
	released time.Time // zero while the block holds the node
}

func parseRecorded(v string) (recorded, bool) {
	f := strings.Fields(v)
	if len(f) == 0 {
		return recorded{}, false
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || n < 0 {
		return recorded{}, false
	}
	r := recorded{version: n}
	if len(f) == 3 && f[1] == "released" {
		if t, err := time.Parse(time.RFC3339, f[2]); err == nil {
			r.released = t
		}
	}
	return r, true
}

func (r recorded) String() string {
	if r.released.IsZero() {
		return strconv.FormatInt(r.version, 10)
	}
	return strconv.FormatInt(r.version, 10) + " released " + r.released.UTC().Format(time.RFC3339)
}

// nodeEdit is the change of one node's labels and annotations that a
// write decides: nil values remove a key.
type nodeEdit struct {
	labels      map[string]*string
	annotations map[string]*string
}

func (e *nodeEdit) setLabel(k string, v *string) {
	if e.labels == nil {
		e.labels = map[string]*string{}
	}
	e.labels[k] = v
}

func (e *nodeEdit) setAnnotation(k string, v *string) {
	if e.annotations == nil {
		e.annotations = map[string]*string{}
	}
	e.annotations[k] = v
}

func (e nodeEdit) empty() bool { return len(e.labels) == 0 && len(e.annotations) == 0 }

func ptr(s string) *string { return &s }

// blockWrite is one write of a block's state to a node: hold (label
// team, version) or give up (no label, version released at).
type blockWrite struct {
	id      string
	team    string
	version int64
	hold    bool
	at      time.Time // of a release: when, for the tombstone
}

// edit is what w changes on node n, and whether the node's record of the
// block refuses it as stale.
func (b *Backend) edit(n *corev1.Node, w blockWrite) (e nodeEdit, stale bool) {
	lk, vk := b.blockLabel(w.id), b.versionKey(w.id)
	rec, _ := parseRecorded(n.Annotations[vk])
	if rec.version > w.version {
		return e, true
	}
	label, labelled := n.Labels[lk]
	if w.hold {
		team := labelSafe(w.team)
		if !labelled || label != team {
			e.setLabel(lk, ptr(team))
		}
		if want := (recorded{version: w.version}); n.Annotations[vk] != want.String() {
			e.setAnnotation(vk, ptr(want.String()))
		}
		return e, false
	}
	if labelled {
		e.setLabel(lk, nil)
	}
	if rec.version < w.version || rec.released.IsZero() {
		e.setAnnotation(vk, ptr(recorded{version: w.version, released: w.at}.String()))
	}
	return e, false
}

// writeBlock applies w to node name, fenced: read from the cache first,
// from the API after a conflict. A node the cluster does not have is
// skipped; a stale write is refused, logged and counted, and is no
// error: the newer write it lost to stands.
func (b *Backend) writeBlock(ctx context.Context, name string, w blockWrite) error {
	return b.fencedPatch(ctx, name, func(n *corev1.Node) (nodeEdit, error) {
		e, stale := b.edit(n, w)
		if stale {
			b.refused.Add(1)
			rec, _ := parseRecorded(n.Annotations[b.versionKey(w.id)])
			b.log.Warn("refused a stale write to a node: a newer version of the block was written there", "node", name, "block", w.id,
				"version", w.version, "recorded", rec.version, "hold", w.hold)
			return nodeEdit{}, nil
		}
		return e, nil
	})
}

// fencedPatch patches node name with what decide makes of it, carrying
// the resourceVersion it decided on, deciding again on a conflict.
func (b *Backend) fencedPatch(ctx context.Context, name string, decide func(*corev1.Node) (nodeEdit, error)) error {
	n, err := b.nodes.Get(name)
	if err != nil {
		n = nil // not cached yet: read it from the API
	}
	for attempt := 0; ; attempt++ {
		if n == nil {
			n, err = b.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				b.log.Warn("a node of a block is not in the cluster", "node", name)
				return nil
			case err != nil:
				return fmt.Errorf("reading node %s: %w", name, err)
			}
		}
		e, err := decide(n)
		if err != nil || e.empty() {
			return err
		}
		meta := map[string]any{"resourceVersion": n.ResourceVersion}
		if len(e.labels) > 0 {
			meta["labels"] = e.labels
		}
		if len(e.annotations) > 0 {
			meta["annotations"] = e.annotations
		}
		patch, err := json.Marshal(map[string]any{"metadata": meta})
		if err != nil {
			return fmt.Errorf("encoding a node's labels: %w", err)
		}
		_, err = b.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
		switch {
		case err == nil:
			b.written.Add(1)
			return nil
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err) && attempt < 8:
			n = nil // changed since it was read: read it again, decide again
		default:
			return fmt.Errorf("patching node %s: %w", name, err)
		}
	}
}

// view is a desired state as the repairs read it.
type view struct {
	epoch int64
	// byNode are the blocks that should hold each node (active ones).
	byNode map[string][]blockWrite
	// live are the versions of the live blocks, by label key.
	live map[string]blockWrite
	// unsettled are the label keys of the blocks left alone.
	unsettled map[string]bool
}

func (b *Backend) newView(d *backend.Desired) *view {
	v := &view{epoch: d.Epoch, byNode: map[string][]blockWrite{}, live: make(map[string]blockWrite, len(d.Blocks)), unsettled: map[string]bool{}}
	for _, id := range d.Unsettled {
		v.unsettled[b.blockLabel(id)] = true
	}
	for _, blk := range d.Blocks {
		w := blockWrite{id: blk.ID, team: blk.Team, version: blk.Version, hold: blk.State == core.StateActive}
		v.live[b.blockLabel(blk.ID)] = w
		if !w.hold {
			continue
		}
		for _, node := range placementNodes(blk) {
			v.byNode[node] = append(v.byNode[node], w)
		}
	}
	return v
}

// converger is the state of the repairs.
type converger struct {
	mu      sync.Mutex
	view    *view
	unknown map[string]time.Time // label key → since when no desired state names its block
}

// Converge replaces the desired state and queues every node to be
// compared with it; nil stops the repairs.
func (b *Backend) Converge(d *backend.Desired) {
	b.conv.mu.Lock()
	if d == nil {
		b.conv.view = nil
		b.conv.mu.Unlock()
		return
	}
	b.conv.view = b.newView(d)
	b.conv.mu.Unlock()
	b.queueAll()
}

func (b *Backend) currentView() *view {
	b.conv.mu.Lock()
	defer b.conv.mu.Unlock()
	return b.conv.view
}

// queueAll queues every node of the cache for a comparison, while the
// repairs run.
func (b *Backend) queueAll() {
	if b.currentView() == nil {
		return
	}
	all, err := b.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	for _, n := range all {
		b.drift.Add(n.Name)
	}
	for _, key := range b.pods.ListKeys() {
		b.drift.Add("pod:" + key)
	}
}

// checkDrift queues a node that the informer added or changed.
func (b *Backend) checkDrift(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok || n.DeletionTimestamp != nil || b.currentView() == nil {
		return
	}
	b.drift.Add(n.Name)
}

// runResync queues every node each ResyncEvery, until ctx ends.
func (b *Backend) runResync(ctx context.Context) {
	t := time.NewTicker(b.cfg.ResyncEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.queueAll()
		}
	}
}

// runDrift repairs the queued nodes until the queue shuts down.
func (b *Backend) runDrift(ctx context.Context) {
	for {
		name, shutdown := b.drift.Get()
		if shutdown {
			return
		}
		again, err := b.repair(ctx, name)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				b.log.Warn("repairing a node's block labels; trying again", "node", name, "err", err)
			}
			b.drift.AddRateLimited(name)
		case again > 0:
			b.drift.Forget(name)
			b.drift.AddAfter(name, again)
		default:
			b.drift.Forget(name)
		}
		b.drift.Done(name)
	}
}

// repair brings node name's block labels to the desired state. again,
// when not zero, is when to look at the node again (a block that may be
// too new for the desired state).
func (b *Backend) repair(ctx context.Context, name string) (again time.Duration, err error) {
	v := b.currentView()
	if v == nil {
		return 0, nil
	}
	if strings.HasPrefix(name, "pod:") {
		return b.repairPod(ctx, v, name)
	}
	cached, err := b.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil // gone: when it is back, the informer queues it
	}
	if err != nil {
		return 0, err
	}
	if !b.sold(cached) || cached.DeletionTimestamp != nil {
		return 0, nil // not capblock's to repair
	}
	var repaired []string
	err = b.fencedPatch(ctx, name, func(n *corev1.Node) (nodeEdit, error) {
		var e nodeEdit
		e, again, repaired = b.repairs(n, v, time.Now())
		return e, nil
	})
	if err == nil && len(repaired) > 0 {
		b.repaired.Add(1)
		b.log.Info("repaired a node that drifted from the store", "node", name, "blocks", repaired, "epoch", v.epoch)
	}
	return again, err
}

// repairs is the edit that brings node n to view v at now, the blocks
// it repairs, and when to look again at a block that v does not know.
func (b *Backend) repairs(n *corev1.Node, v *view, now time.Time) (e nodeEdit, again time.Duration, blocks []string) {
	want := map[string]bool{}
	merge := func(w blockWrite) {
		x, _ := b.edit(n, w)
		for k, val := range x.labels {
			e.setLabel(k, val)
		}
		for k, val := range x.annotations {
			e.setAnnotation(k, val)
		}
		if !x.empty() {
			blocks = append(blocks, w.id)
		}
	}
	// 1. The blocks that hold the node carry their labels.
	for _, w := range v.byNode[n.Name] {
		key := b.blockLabel(w.id)
		want[key] = true
		if !v.unsettled[key] {
			merge(w) // a stale view (recorded newer) edits nothing
		}
	}
	// 2. Every other label in the blocks' domain goes.
	prefix := b.labelPrefix()
	for key := range n.Labels {
		if !strings.HasPrefix(key, prefix) || want[key] || v.unsettled[key] {
			continue
		}
		if w, live := v.live[key]; live {
			w.hold, w.at = false, now
			merge(w)
			b.known(key)
			continue
		}
		id := strings.TrimPrefix(key, prefix)
		vk := b.versionPrefix() + id
		rec, ours := parseRecorded(n.Annotations[vk])
		if ours {
			// Written by capblock for a block the index does not know:
			// over, or too new for it. Only once it stayed unknown.
			if wait := b.unknownFor(key, now); wait > 0 {
				again = minPositive(again, wait)
				continue
			}
		}
		e.setLabel(key, nil)
		b.known(key)
		if ours && rec.released.IsZero() {
			e.setAnnotation(vk, ptr(recorded{version: rec.version, released: now}.String()))
		}
		blocks = append(blocks, id)
	}
	// 3. Tombstones of blocks over for tombstoneKept go.
	vprefix := b.versionPrefix()
	for key, val := range n.Annotations {
		if !strings.HasPrefix(key, vprefix) {
			continue
		}
		lk := prefix + strings.TrimPrefix(key, vprefix)
		if _, live := v.live[lk]; live || v.unsettled[lk] {
			continue
		}
		if _, labelled := n.Labels[lk]; labelled {
			continue
		}
		switch rec, ok := parseRecorded(val); {
		case !ok || (!rec.released.IsZero() && now.Sub(rec.released) > tombstoneKept):
			e.setAnnotation(key, nil)
		case rec.released.IsZero():
			// Its label went by hand: the record says so from now on.
			e.setAnnotation(key, ptr(recorded{version: rec.version, released: now}.String()))
		}
	}
	return e, again, blocks
}

// unknownFor reports how much longer the block of label key must stay
// unknown before its state goes; zero once it has stayed unknown for
// backend.UnknownGrace.
func (b *Backend) unknownFor(key string, now time.Time) time.Duration {
	b.conv.mu.Lock()
	defer b.conv.mu.Unlock()
	if b.conv.unknown == nil {
		b.conv.unknown = map[string]time.Time{}
	}
	since, ok := b.conv.unknown[key]
	if !ok {
		b.conv.unknown[key] = now
		return backend.UnknownGrace
	}
	return max(0, backend.UnknownGrace-now.Sub(since))
}

// known forgets that the block of label key was unknown.
func (b *Backend) known(key string) {
	b.conv.mu.Lock()
	delete(b.conv.unknown, key)
	b.conv.mu.Unlock()
}

func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 || b < a {
		return b
	}
	return a
}

// WriteCounts are what the backend's writes of blocks' labels did since
// it started.
type WriteCounts struct {
	// Written counts the node patches that took effect.
	Written int64
	// Refused counts the writes refused as older than the version that
	// a node records.
	Refused int64
	// Repaired counts the nodes repaired because they had drifted.
	Repaired int64
}

// WriteCounts reports what the backend's writes did so far.
func (b *Backend) WriteCounts() WriteCounts {
	return WriteCounts{Written: b.written.Load(), Refused: b.refused.Load(), Repaired: b.repaired.Load()}
}

// Collectors are the backend's metrics, for /metrics.
func (b *Backend) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "capblock_engine_node_writes_total",
			Help: "Patches of blocks' labels on Kubernetes nodes that took effect."},
			func() float64 { return float64(b.written.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "capblock_engine_stale_writes_refused_total",
			Help: "Writes of a block to a node refused because the node records a newer version of the block."},
			func() float64 { return float64(b.refused.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "capblock_engine_nodes_repaired_total",
			Help: "Nodes whose blocks' labels had drifted from the store, repaired."},
			func() float64 { return float64(b.repaired.Load()) }),
	}
}
