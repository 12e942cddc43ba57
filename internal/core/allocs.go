package core

import (
	"cmp"
	"iter"
	"strings"

	"github.com/google/btree"
)

// allocList is a node's allocations, ordered by start hour (then block,
// end and GPUs, so that the order never depends on the order blocks were
// added in), in a B-tree: adding or removing one costs the logarithm of
// what the node holds, and the allocations that may overlap some hours
// are found by their start (window), so that a decision costs what it
// touches, not what the node holds.
type allocList struct {
	tree *btree.BTreeG[alloc]
	// maxLen bounds the hours of any allocation the node has held.
	maxLen int
}

func allocLess(a, b alloc) bool {
	if c := cmp.Compare(a.start, b.start); c != 0 {
		return c < 0
	}
	if c := strings.Compare(a.block, b.block); c != 0 {
		return c < 0
	}
	if c := cmp.Compare(a.end, b.end); c != 0 {
		return c < 0
	}
	return a.mask < b.mask
}

func (l *allocList) insert(a alloc) {
	if l.tree == nil {
		l.tree = btree.NewG(16, allocLess)
	}
	l.maxLen = max(l.maxLen, a.end-a.start)
	l.tree.ReplaceOrInsert(a)
}

func (l *allocList) remove(a alloc) {
	if l.tree != nil {
		l.tree.Delete(a)
	}
}

// len is how many allocations the node holds.
func (l *allocList) len() int {
	if l.tree == nil {
		return 0
	}
	return l.tree.Len()
}

// all yields every allocation, in order.
func (l *allocList) all() iter.Seq[alloc] {
	return func(yield func(alloc) bool) {
		if l.tree != nil {
			l.tree.Ascend(yield)
		}
	}
}

// window yields, in order, the allocations that may overlap hours
// [s, e): those that start before e, and no earlier than s less the
// longest allocation the node has held.
func (l *allocList) window(s, e int) iter.Seq[alloc] {
	return func(yield func(alloc) bool) {
		if l.tree != nil && s-l.maxLen < e {
			l.tree.AscendRange(alloc{start: s - l.maxLen}, alloc{start: e}, yield)
		}
	}
}
