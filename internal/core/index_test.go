package core

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var indexNow = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// snapshotHours is how far ahead snapshots look; fixtures stay within it.
const snapshotHours = 48

func at(h int) time.Time { return indexNow.Add(time.Duration(h) * time.Hour) }

// indexFleet is one zone of four 8-GPU H100 nodes, n1 and n2 on rack r1,
// n3 and n4 on rack r2, sold whole (h100.8x) and by the GPU (h100.1x).
func indexFleet() Fleet {
	f := Fleet{Currency: "USD", Limits: DefaultLimits(), Pricing: DefaultPricing(), Types: []InstanceType{
		{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: Money{Minor: 9832, Currency: "USD"}},
		{Name: "h100.1x", GPUModel: "H100", GPUsPerInstance: 1, OnDemand: Money{Minor: 1229, Currency: "USD"}},
	}}
	for i := 1; i <= 4; i++ {
		f.Nodes = append(f.Nodes, Node{Name: fmt.Sprintf("n%d", i), Zone: "z", Rack: fmt.Sprintf("r%d", (i+1)/2),
			GPUModel: "H100", GPUs: 8, Health: Healthy})
	}
	return f
}

// newTestIndex indexes the blocks on indexFleet at indexNow.
func newTestIndex(t *testing.T, blocks ...Block) *Index {
	t.Helper()
	f := indexFleet()
	ix, err := NewIndex(&f, blocks, indexNow)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// blockWrapper builds test blocks: makeBlock("a").on("n1", 0, 1).hours(10, 20).obj().
type blockWrapper struct{ Block }

// makeBlock starts a scheduled block of team t1, of h100.1x, over hours
// [10, 20), with no placements yet.
func makeBlock(id string) *blockWrapper {
	return &blockWrapper{Block{ID: id, Team: "t1", InstanceType: "h100.1x", GPUModel: "H100", Zone: "z",
		State: StateScheduled, Start: at(10), End: at(20)}}
}

// on places one instance per GPU on node.
func (w *blockWrapper) on(node string, gpus ...int) *blockWrapper {
	w.Placements = append(w.Placements, Placement{Node: node, GPUs: gpus})
	w.Count += len(gpus)
	return w
}

// whole makes the block h100.8x, one instance per node.
func (w *blockWrapper) whole(nodes ...string) *blockWrapper {
	w.InstanceType = "h100.8x"
	for _, n := range nodes {
		w.Placements = append(w.Placements, wholeNode(n))
		w.Count++
	}
	return w
}

func (w *blockWrapper) hours(from, to int) *blockWrapper {
	w.Start, w.End = at(from), at(to)
	return w
}

func (w *blockWrapper) state(s BlockState) *blockWrapper {
	w.State = s
	return w
}

func (w *blockWrapper) team(team string) *blockWrapper {
	w.Team = team
	return w
}

func (w *blockWrapper) obj() Block { return w.Block }

// gpus is the GPUs [from, to).
func gpus(from, to int) []int {
	var out []int
	for g := from; g < to; g++ {
		out = append(out, g)
	}
	return out
}

// indexSnapshot is what can be seen of an index over the first
// snapshotHours: its blocks, each node's allocations, the pool summaries,
// the free instances of each type, what each team holds and the decisions
// in flight.
type indexSnapshot struct {
	Blocks    []Block
	Assumed   []string
	Decisions []string
	Allocs    map[string][]string
	Busy      map[string][]int32
	Used      map[string][]int32
	Free      map[string][]int
	Held      map[string][]int
}

func snapshot(t *testing.T, ix *Index) indexSnapshot {
	t.Helper()
	s := indexSnapshot{Allocs: map[string][]string{}, Busy: map[string][]int32{}, Used: map[string][]int32{},
		Free: map[string][]int{}, Held: map[string][]int{}}
	for _, b := range ix.Blocks() {
		s.Blocks = append(s.Blocks, *b)
		if ix.Assumed(b.ID) {
			s.Assumed = append(s.Assumed, b.ID)
		}
	}
	sort.Slice(s.Blocks, func(i, j int) bool { return s.Blocks[i].ID < s.Blocks[j].ID })
	sort.Strings(s.Assumed)
	for k := range ix.decisions {
		s.Decisions = append(s.Decisions, k)
	}
	sort.Strings(s.Decisions)
	for _, ns := range ix.nodes {
		for a := range ns.allocs.all() {
			owner, kept := keptOwner(a.block)
			line := fmt.Sprintf("%s %08b [%d,%d)", owner, a.mask, a.start, a.end)
			if kept {
				line += " kept"
			}
			s.Allocs[ns.node.Name] = append(s.Allocs[ns.node.Name], line)
		}
	}
	for _, p := range ix.pools {
		key := fmt.Sprintf("%s/%s/%d", p.model, p.zone, p.gpus)
		for h := range snapshotHours {
			s.Busy[key] = append(s.Busy[key], p.busyAt(h))
			s.Used[key] = append(s.Used[key], p.usedAt(h))
		}
	}
	for _, typ := range ix.Fleet.Types {
		slots, err := ix.Availability(typ, "", at(0), at(snapshotHours))
		if err != nil {
			t.Fatal(err)
		}
		for _, sl := range slots {
			s.Free[typ.Name] = append(s.Free[typ.Name], sl.Free)
		}
	}
	for _, team := range []string{"t1", "t2"} {
		for _, typ := range []string{"", "h100.8x", "h100.1x"} {
			key := strings.TrimSuffix(team+"/"+typ, "/")
			for h := range snapshotHours {
				s.Held[key] = append(s.Held[key], ix.Held(team, typ, at(h), at(h+1)))
			}
		}
	}
	return s
}

// TestAddAllOrNothing adds blocks that Add must refuse, some on their
// second placement: the index must be exactly as before, and a later Add
// and Remove must leave nothing behind.
func TestAddAllOrNothing(t *testing.T) {
	base := []Block{
		makeBlock("a").on("n1", gpus(0, 4)...).obj(),
		makeBlock("w").whole("n3").hours(5, 30).obj(),
	}
	tests := map[string]struct {
		block   Block
		wantErr string
	}{
		"an unknown node in the second placement": {
			block:   makeBlock("x").on("n2", 0).on("n9", 0).obj(),
			wantErr: "block x: unknown node n9",
		},
		"a GPU out of range in the second placement": {
			block:   makeBlock("x").on("n2", 0).on("n4", 8).obj(),
			wantErr: "block x: node n4 has no GPU 8",
		},
		"a negative GPU": {
			block:   makeBlock("x").on("n2", 1, -1).obj(),
			wantErr: "block x: node n2 has no GPU -1",
		},
		"a GPU placed twice in one placement": {
			block:   makeBlock("x").on("n2", 1, 1).obj(),
			wantErr: "block x: GPU 1 of node n2 placed twice",
		},
		"a GPU placed twice in two placements": {
			block:   makeBlock("x").on("n2", 1, 2).on("n4", 0).on("n2", 2).obj(),
			wantErr: "block x: GPU 2 of node n2 placed twice",
		},
		"a bad new version of an indexed block": {
			block:   makeBlock("a").on("n1", gpus(0, 4)...).on("n9", 0).hours(10, 30).obj(),
			wantErr: "block a: unknown node n9",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ix := newTestIndex(t, base...)
			before := snapshot(t, ix)
			err := ix.Add(tc.block)
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("Add: got error %v, want %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(before, snapshot(t, ix)); diff != "" {
				t.Fatalf("the index changed after a refused Add (-before +after):\n%s", diff)
			}
			// A good block then comes and goes; a, then, goes too.
			if err := ix.Add(makeBlock("x").on("n2", 0, 1).hours(12, 18).obj()); err != nil {
				t.Fatal(err)
			}
			ix.Remove("x")
			if diff := cmp.Diff(before, snapshot(t, ix)); diff != "" {
				t.Fatalf("Add then Remove of a good block (-before +after):\n%s", diff)
			}
			ix.Remove("a")
			if diff := cmp.Diff(snapshot(t, newTestIndex(t, base[1])), snapshot(t, ix)); diff != "" {
				t.Fatalf("after removing a (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAddRemove adds good blocks to an index and removes them: the index
// must be as before; adding a block twice is adding it once.
func TestAddRemove(t *testing.T) {
	base := []Block{
		makeBlock("a").on("n1", gpus(0, 4)...).obj(),
		makeBlock("w").whole("n3").hours(5, 30).obj(),
	}
	tests := map[string]Block{
		"fractional":                            makeBlock("x").on("n1", 4, 5).on("n2", 0).obj(),
		"one node in two placements":            makeBlock("x").on("n2", 0, 1).on("n2", 2).hours(0, 40).obj(),
		"whole nodes overlapping another block": makeBlock("x").whole("n3", "n4").hours(20, 40).obj(),
		"an empty window":                       makeBlock("x").on("n2", 0).hours(10, 10).obj(),
		"starting before the origin": func() Block {
			b := makeBlock("x").on("n2", 0).obj()
			b.Start = indexNow.Add(-5 * time.Hour)
			return b
		}(),
	}
	for name, b := range tests {
		t.Run(name, func(t *testing.T) {
			ix := newTestIndex(t, base...)
			before := snapshot(t, ix)
			if err := ix.Add(b); err != nil {
				t.Fatal(err)
			}
			once := snapshot(t, ix)
			if err := ix.Add(b); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(once, snapshot(t, ix)); diff != "" {
				t.Fatalf("adding twice (-once +twice):\n%s", diff)
			}
			ix.Remove(b.ID)
			if diff := cmp.Diff(before, snapshot(t, ix)); diff != "" {
				t.Fatalf("Add then Remove (-before +after):\n%s", diff)
			}
		})
	}
}
