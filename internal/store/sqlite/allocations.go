package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"capblock/internal/core"
	"capblock/internal/store"
)

// Allocations (0019). The allocations table holds the GPUs that live
// blocks hold, one row per GPU, in one b-tree ordered as the overlap
// re-check reads it: by node, GPU and end. A block that is not live holds
// nothing and has no rows. A live block's rows are its stored placements
// over [start, end) (start being where its last move began), so a commit
// finds them from the block itself: by node, GPU, the stored end and the
// block's id, a seek each.

// gpuRef is one GPU of a placement.
type gpuRef struct {
	node string
	gpu  int
}

// gpuRefs lists the GPUs of placements.
func gpuRefs(placements []core.Placement) []gpuRef {
	var refs []gpuRef
	for _, p := range placements {
		for _, g := range p.GPUs {
			refs = append(refs, gpuRef{p.Node, g})
		}
	}
	return refs
}

// allocKind is a statement on the allocations of one block, written for
// a number of its GPUs.
type allocKind int

const (
	// allocInsert inserts rows: ?1 block, ?2 start, ?3 end.
	allocInsert allocKind = iota
	// allocDelete deletes rows: ?1 block, ?2 their end.
	allocDelete
	// allocEnd moves the end of rows: ?1 block, ?2 their end, ?3 the new one.
	allocEnd
	// allocOverlap finds a live allocation of another block that shares
	// a GPU and intersects the time range of one of the rows: ?1 block,
	// ?2 their end.
	allocOverlap
	allocKinds
)

// allocChunk is the most GPUs one statement names. Statements for
// allocChunk, allocChunk/2, …, 1 GPUs are written, so a block of r GPUs
// takes r/allocChunk statements plus one per bit set in r%allocChunk:
// a block of two whole 8-GPU nodes takes one of each kind it needs.
const allocChunk = 64

// allocSQL are the statements' texts, by kind and GPUs. They are not
// prepared with the others: the connection's statement cache compiles
// each the first time a commit needs it, since a fleet of 8-GPU nodes
// never uses the largest.
var allocSQL = func() [allocKinds]map[int]string {
	var m [allocKinds]map[int]string
	for k := range allocKinds {
		m[k] = map[int]string{}
		for n := allocChunk; n >= 1; n /= 2 {
			m[k][n] = allocStatement(k, n)
		}
	}
	return m
}()

// allocFixed is how many parameters come before the GPUs' in each kind.
var allocFixed = [allocKinds]int{allocInsert: 3, allocDelete: 2, allocEnd: 3, allocOverlap: 2}

// allocStatement writes the statement of kind for n GPUs, whose node and
// index are the parameters after the kind's fixed ones.
func allocStatement(kind allocKind, n int) string {
	first := allocFixed[kind] + 1
	var gpus strings.Builder
	for i := range n {
		if i > 0 {
			gpus.WriteByte(',')
		}
		if kind == allocInsert {
			fmt.Fprintf(&gpus, "(?%d, ?%d, ?3, ?1, ?2)", first+2*i, first+1+2*i)
		} else {
			fmt.Fprintf(&gpus, "(?%d, ?%d)", first+2*i, first+1+2*i)
		}
	}
	switch kind {
	case allocInsert:
		return `INSERT INTO allocations (node, gpu, end_time, block_id, start_time) VALUES ` + gpus.String()
	case allocDelete:
		return `DELETE FROM allocations WHERE block_id = ?1 AND end_time = ?2 AND (node, gpu) IN (VALUES ` + gpus.String() + `)`
	case allocEnd:
		return `UPDATE allocations SET end_time = ?3 WHERE block_id = ?1 AND end_time = ?2 AND (node, gpu) IN (VALUES ` + gpus.String() + `)`
	default:
		return strings.Replace(findOverlapSQL, "(VALUES)", "(VALUES "+gpus.String()+")", 1)
	}
}

// findOverlapSQL finds one live allocation of another block that shares a
// GPU and intersects the time range of an allocation a of block ?1 (its
// rows ending at ?2 on the GPUs listed in place of "(VALUES)"). It runs
// after the change is written, so it sees the change's own new rows (two
// blocks of one change may not overlap either) and none of the rows the
// change replaced.
//
// For each a it reads one time of its GPU: the first end after a's start
// among the other blocks' allocations (n), and then the allocations
// ending then (o), which conflict when they start before a ends. Three
// seeks per GPU, whatever the number of allocations the GPU holds: the
// allocations that end later are never read.
//
// That is exact. The live allocations of a GPU do not overlap before the
// change (the invariant this check keeps), and Commit checks every live
// allocation that the change writes (a new block's, a moved one's, one
// made longer or live again). Say the change leaves two live allocations
// of a GPU overlapping, one of them a, the other x. Among the others'
// allocations ending after a's start, the first ends at E: those that
// end then all start before a ends, or none of them does. If none does,
// neither does any allocation ending later (they do not overlap each
// other, so they start after E), x included, since x ends after a's
// start: a contradiction. So o finds one.
const findOverlapSQL = `SELECT o.block_id, a.node, a.gpu
	FROM allocations a
	JOIN allocations o
	  ON o.node = a.node AND o.gpu = a.gpu
	 AND o.end_time = (
	     SELECT n.end_time FROM allocations n
	     WHERE n.node = a.node AND n.gpu = a.gpu
	       AND n.end_time > a.start_time AND n.block_id <> a.block_id
	     ORDER BY n.end_time LIMIT 1)
	 AND o.start_time < a.end_time
	 AND o.block_id <> a.block_id
	WHERE a.block_id = ?1 AND a.end_time = ?2 AND (a.node, a.gpu) IN (VALUES)
	LIMIT 1`

// eachAllocChunk calls f with the statement of kind for each chunk of
// refs and its arguments: fixed, then the chunk's nodes and GPUs.
func eachAllocChunk(kind allocKind, refs []gpuRef, fixed []any, f func(query string, args []any) error) error {
	for len(refs) > 0 {
		n := allocChunk
		for n > len(refs) {
			n /= 2
		}
		args := make([]any, 0, len(fixed)+2*n)
		args = append(args, fixed...)
		for _, r := range refs[:n] {
			args = append(args, r.node, r.gpu)
		}
		if err := f(allocSQL[kind][n], args); err != nil {
			return err
		}
		refs = refs[n:]
	}
	return nil
}

// execAllocations runs the statement of kind on block id's GPUs refs.
func (w *commitTx) execAllocations(kind allocKind, what, id string, refs []gpuRef, fixed ...any) error {
	return eachAllocChunk(kind, refs, append([]any{id}, fixed...), func(query string, args []any) error {
		if _, err := w.tx.ExecContext(w.ctx, query, args...); err != nil {
			return fmt.Errorf("%s allocations of block %s: %w", what, id, err)
		}
		return nil
	})
}

// insertAllocations stores the rows of block id's placements over
// [start, end).
func (w *commitTx) insertAllocations(id string, start, end int64, placements []core.Placement) error {
	return w.execAllocations(allocInsert, "inserting", id, gpuRefs(placements), start, end)
}

// allocated is a live block whose allocations a commit wrote: the
// overlap re-check reads them back.
type allocated struct {
	id   string
	end  int64
	refs []gpuRef
}

// checkOverlap fails with a conflict when an allocation of a overlaps a
// live allocation of another block.
func (w *commitTx) checkOverlap(a allocated) error {
	return eachAllocChunk(allocOverlap, a.refs, []any{a.id, a.end}, func(query string, args []any) error {
		var (
			other, node string
			gpu         int
		)
		err := w.tx.QueryRowContext(w.ctx, query, args...).Scan(&other, &node, &gpu)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("checking allocations of block %s: %w", a.id, err)
		}
		return fmt.Errorf("block %s: GPU %d of node %s is taken by block %s: %w", a.id, gpu, node, other, store.ErrConflict)
	})
}
