package core

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestNodeSet holds countRange and next to a plain list of members, on
// sets of one to four words.
func TestNodeSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 63, 64, 65, 130, 256} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			s := newNodeSet(n)
			in := make([]bool, n)
			for range 200 {
				i := rng.IntN(n)
				if rng.IntN(3) == 0 {
					s.remove(i)
					in[i] = false
				} else {
					s.add(i)
					in[i] = true
				}
				lo := rng.IntN(n + 1)
				hi := lo + rng.IntN(n+1-lo)
				want := 0
				for j := lo; j < hi; j++ {
					if in[j] {
						want++
					}
				}
				if got := s.countRange(lo, hi); got != want {
					t.Fatalf("countRange(%d, %d) = %d, want %d", lo, hi, got, want)
				}
				from := rng.IntN(n)
				next := -1
				for j := from; j < n; j++ {
					if in[j] {
						next = j
						break
					}
				}
				if got := s.next(from); got != next {
					t.Fatalf("next(%d) = %d, want %d", from, got, next)
				}
			}
		})
	}
}

// TestHourTree holds busyOver to the union of the hours it covers, as
// nodes are painted busy and free over random hours and the tree grows.
func TestHourTree(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const nodes = 150
	tr := newHourTree(len(newNodeSet(nodes)), 5)
	var busy [][nodes]bool // by hour
	hours := 5
	for i := range 1000 {
		pos, a := rng.IntN(nodes), rng.IntN(hours+10)
		b := a + 1 + rng.IntN(20)
		var covered [][2]int
		for c := a - 3 + rng.IntN(5); c < b; c += 1 + rng.IntN(6) {
			covered = append(covered, [2]int{c, c + 1 + rng.IntN(6)})
		}
		tr.ensure(b)
		hours = max(hours, b)
		for len(busy) < hours+5 {
			busy = append(busy, [nodes]bool{})
		}
		tr.paint(pos, a, b, covered)
		for h := a; h < b; h++ {
			busy[h][pos] = false
			for _, c := range covered {
				busy[h][pos] = busy[h][pos] || (c[0] <= h && h < c[1])
			}
		}
		s := rng.IntN(hours + 5)
		e := s + rng.IntN(hours+5-s+1)
		got := newNodeSet(nodes)
		tr.busyOver(s, e, got)
		for n := range nodes {
			want := false
			for h := s; h < e; h++ {
				want = want || busy[h][n]
			}
			if got.has(n) != want {
				t.Fatalf("step %d: node %d busy over hours %d..%d: %v, want %v", i, n, s, e, got.has(n), want)
			}
		}
	}
}
