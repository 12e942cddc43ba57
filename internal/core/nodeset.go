package core

import "math/bits"

// nodeSet is a set of a pool's nodes, one bit per position in the pool
// (see poolOcc).
type nodeSet []uint64

func newNodeSet(n int) nodeSet { return make(nodeSet, (n+63)/64) }

func (s nodeSet) has(i int) bool { return s[i>>6]&(1<<(i&63)) != 0 }
func (s nodeSet) add(i int)      { s[i>>6] |= 1 << (i & 63) }
func (s nodeSet) remove(i int)   { s[i>>6] &^= 1 << (i & 63) }

func (s nodeSet) clear() {
	for i := range s {
		s[i] = 0
	}
}

func (s nodeSet) count() int {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return n
}

// countRange counts the members in positions [lo, hi).
func (s nodeSet) countRange(lo, hi int) int {
	if lo >= hi {
		return 0
	}
	first, last := lo>>6, (hi-1)>>6
	loMask := ^uint64(0) << (lo & 63)
	hiMask := ^uint64(0) >> (63 - (hi-1)&63)
	if first == last {
		return bits.OnesCount64(s[first] & loMask & hiMask)
	}
	n := bits.OnesCount64(s[first]&loMask) + bits.OnesCount64(s[last]&hiMask)
	for _, w := range s[first+1 : last] {
		n += bits.OnesCount64(w)
	}
	return n
}

// next returns the first member at position i or after, or -1.
func (s nodeSet) next(i int) int {
	w := i >> 6
	if w >= len(s) {
		return -1
	}
	if m := s[w] >> (i & 63); m != 0 {
		return i + bits.TrailingZeros64(m)
	}
	for w++; w < len(s); w++ {
		if s[w] != 0 {
			return w<<6 + bits.TrailingZeros64(s[w])
		}
	}
	return -1
}

// hourTree holds, for every hour, the set of a pool's nodes busy at that
// hour, and above the hours a binary tree whose every node is the union
// of its two children: level k, entry i is the nodes busy at some hour of
// [i·2^k, (i+1)·2^k). The nodes busy at some hour of any window are then
// the union of at most two entries per level, so finding them costs
// about 2·log2(window) unions of a set, whatever the window.
type hourTree struct {
	words  int // per set
	hours  int
	levels [][]uint64 // level k: ceil(hours / 2^k) sets, words each
}

func newHourTree(words, hours int) hourTree {
	t := hourTree{words: words}
	t.resize(max(hours, 1))
	return t
}

// resize gives the tree hours entries at level 0, keeping those it has,
// and recomputes the levels above.
func (t *hourTree) resize(hours int) {
	old := t.levels
	t.hours = hours
	t.levels = nil
	for n := hours; ; n = (n + 1) / 2 {
		t.levels = append(t.levels, make([]uint64, n*t.words))
		if n == 1 {
			break
		}
	}
	if len(old) > 0 {
		copy(t.levels[0], old[0])
	}
	for k := 1; k < len(t.levels); k++ {
		below, here := t.levels[k-1], t.levels[k]
		for j := range below {
			i := (j / t.words / 2 * t.words) + j%t.words
			here[i] |= below[j]
		}
	}
}

// ensure makes the tree cover hours [0, h).
func (t *hourTree) ensure(h int) {
	if h > t.hours {
		t.resize(max(h, 2*t.hours))
	}
}

func (t *hourTree) entry(k, i int) nodeSet { return t.levels[k][i*t.words : (i+1)*t.words] }

// busyOver sets dst to the nodes busy at some hour of [s, e).
func (t *hourTree) busyOver(s, e int, dst nodeSet) {
	dst.clear()
	s, e = max(s, 0), min(e, t.hours)
	for k := 0; s < e; k++ {
		if s&1 == 1 {
			orInto(dst, t.entry(k, s))
			s++
		}
		if e&1 == 1 {
			e--
			orInto(dst, t.entry(k, e))
		}
		s, e = s>>1, e>>1
	}
}

func orInto(dst, src nodeSet) {
	for i, w := range src {
		dst[i] |= w
	}
}

// paint records the node at pos as busy at the hours of [a, b) that
// covered holds (ranges sorted by start, which may overlap) and free at
// the others, and updates the levels above.
func (t *hourTree) paint(pos, a, b int, covered [][2]int) {
	w, word, bit := t.words, pos>>6, uint64(1)<<(pos&63)
	hours := t.levels[0]
	h := a
	for _, c := range covered {
		for ; h < min(c[0], b); h++ {
			hours[h*w+word] &^= bit
		}
		for h = max(h, c[0]); h < min(c[1], b); h++ {
			hours[h*w+word] |= bit
		}
	}
	for ; h < b; h++ {
		hours[h*w+word] &^= bit
	}
	// Each level above: an entry is busy when either of its two is.
	for k := 1; k < len(t.levels) && a < b; k++ {
		a, b = a>>1, (b+1)>>1
		below, here := t.levels[k-1], t.levels[k]
		n := len(below) / w
		for i := a; i < b; i++ {
			v := below[2*i*w+word]
			if 2*i+1 < n {
				v |= below[(2*i+1)*w+word]
			}
			if v&bit != 0 {
				here[i*w+word] |= bit
			} else {
				here[i*w+word] &^= bit
			}
		}
	}
}
