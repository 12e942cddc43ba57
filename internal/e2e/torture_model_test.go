package e2e

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The torture test's sequential specification: capacity booked on a
// fleet of whole nodes of one type, in windows of a few hours that no
// purchase spans. Each window is a partition of its own (porcupine's
// P-compositionality): a purchase in one window neither needs nor takes
// capacity in another, so the history is linearizable if and only if
// each window's is.
//
// A window's state is the set of its live blocks, named by the client
// token that bought each one; their terms (hours and instances) are
// fixed by the token, so the set alone says how much of each hour is
// booked.

// bookingTerms are what one client token asked for: count instances
// over the hours [start, end) of a window, counted from its start.
type bookingTerms struct {
	window     int
	start, end int
	count      int
}

// never is the return time of an operation whose outcome its client
// never learnt: after every other, so porcupine may place it anywhere
// after its call.
const never = math.MaxInt64

type bookingOp int

const (
	opPurchase bookingOp = iota // buy the token's terms
	opCancel                    // cancel the token's block
	opGet                       // read the token's block
	opList                      // read every live block
)

func (o bookingOp) String() string {
	return [...]string{"purchase", "cancel", "get", "list"}[o]
}

type bookingInput struct {
	op     bookingOp
	token  string // purchase, cancel, get
	window int    // list: the window that a partition's share of it reads
}

// outcome is how an operation ended, as its client saw it.
type outcome int

const (
	outcomeOK      outcome = iota // acknowledged: bought, cancelled, read
	outcomeRefused                // purchase: no_capacity; cancel: invalid_state
	outcomeUnknown                // never answered for sure: it may or may not have taken effect
)

func (o outcome) String() string { return [...]string{"ok", "refused", "unknown"}[o] }

type bookingOutput struct {
	outcome outcome
	live    bool     // get: the block holds capacity (scheduled)
	tokens  []string // list: the live blocks' tokens, sorted
}

// bookedState is one window's live blocks by token, sorted; key joins
// them, for equality and hashing.
type bookedState struct {
	tokens []string
	key    string
}

func newBookedState(tokens []string) *bookedState {
	return &bookedState{tokens: tokens, key: strings.Join(tokens, ",")}
}

func (s *bookedState) has(token string) bool {
	_, found := slices.BinarySearch(s.tokens, token)
	return found
}

func (s *bookedState) with(token string) *bookedState {
	i, found := slices.BinarySearch(s.tokens, token)
	if found {
		return s
	}
	return newBookedState(slices.Insert(slices.Clone(s.tokens), i, token))
}

func (s *bookedState) without(token string) *bookedState {
	i, found := slices.BinarySearch(s.tokens, token)
	if !found {
		return s
	}
	return newBookedState(slices.Delete(slices.Clone(s.tokens), i, i+1))
}

// bookingModel checks histories against capacity booked hour by hour:
// whole-node instances, placed anywhere while placements are tentative,
// are limited only by the instances booked in each hour (DESIGN.md,
// "Placement is tentative until lock-in").
type bookingModel struct {
	terms    map[string]bookingTerms // every token a purchase was made under
	windows  int
	hours    int // a window's length
	capacity int // instances sold in each hour
	// anyRefusal takes every refusal for no capacity as possible, and
	// excused the refusals of these tokens: what is left of the
	// specification checks the rest of a history whose refusals are
	// not all linearizable.
	anyRefusal bool
	excused    map[string]bool
}

// fits reports whether t's instances are free in every one of its hours.
func (m bookingModel) fits(s *bookedState, t bookingTerms) bool {
	used := make([]int, m.hours)
	for _, tok := range s.tokens {
		b := m.terms[tok]
		for h := b.start; h < b.end; h++ {
			used[h] += b.count
		}
	}
	for h := t.start; h < t.end; h++ {
		if used[h]+t.count > m.capacity {
			return false
		}
	}
	return true
}

// step is the specification. A purchase is accepted only when its
// capacity is free, and refused only when it is not; a cancel frees a
// live block and is refused only for one that is not; reads return the
// live set. An operation whose outcome is unknown takes effect where it
// can, and porcupine, which may place it anywhere after its call (its
// return is after every other), finds the point where it did, or the end
// of the history where its effect is seen by nothing.
func (m bookingModel) step(state, input, output any) (bool, any) {
	s, in, out := state.(*bookedState), input.(bookingInput), output.(bookingOutput)
	switch in.op {
	case opPurchase:
		fits := !s.has(in.token) && m.fits(s, m.terms[in.token])
		switch out.outcome {
		case outcomeOK:
			return fits, s.with(in.token)
		case outcomeRefused:
			return !fits || m.anyRefusal || m.excused[in.token], s
		default:
			if fits {
				return true, s.with(in.token)
			}
			return true, s
		}
	case opCancel:
		live := s.has(in.token)
		switch out.outcome {
		case outcomeOK:
			return live, s.without(in.token)
		case outcomeRefused:
			return !live, s
		default:
			return true, s.without(in.token)
		}
	case opGet:
		return s.has(in.token) == out.live, s
	default:
		return s.key == strings.Join(out.tokens, ","), s
	}
}

// partition splits the history by window; a list is split into one
// read per window, of the tokens it returned there.
func (m bookingModel) partition(history []porcupine.Operation) [][]porcupine.Operation {
	parts := make([][]porcupine.Operation, m.windows)
	for _, op := range history {
		in := op.Input.(bookingInput)
		if in.op != opList {
			w := m.terms[in.token].window
			parts[w] = append(parts[w], op)
			continue
		}
		byWindow := make([][]string, m.windows)
		for _, tok := range op.Output.(bookingOutput).tokens {
			w := m.terms[tok].window
			byWindow[w] = append(byWindow[w], tok)
		}
		for w := range parts {
			share := op
			share.Input = bookingInput{op: opList, window: w}
			share.Output = bookingOutput{outcome: outcomeOK, tokens: byWindow[w]}
			parts[w] = append(parts[w], share)
		}
	}
	return parts
}

func (m bookingModel) porcupine() porcupine.Model {
	return porcupine.Model{
		Partition: m.partition,
		Init:      func() any { return newBookedState(nil) },
		Step:      m.step,
		Equal:     func(a, b any) bool { return a.(*bookedState).key == b.(*bookedState).key },
		Hash: func(s any) uint64 {
			h := fnv.New64a()
			h.Write([]byte(s.(*bookedState).key))
			return h.Sum64()
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(bookingInput), output.(bookingOutput)
			switch in.op {
			case opPurchase:
				t := m.terms[in.token]
				return fmt.Sprintf("purchase %s (%d × hours %d-%d) -> %s", in.token, t.count, t.start, t.end, out.outcome)
			case opCancel:
				return fmt.Sprintf("cancel %s -> %s", in.token, out.outcome)
			case opGet:
				return fmt.Sprintf("get %s -> live %v", in.token, out.live)
			default:
				return fmt.Sprintf("list -> [%s]", strings.Join(out.tokens, " "))
			}
		},
		DescribeState: func(s any) string { return "[" + s.(*bookedState).key + "]" },
	}
}

// TestBookingModel checks that the model tells linearizable histories of
// two instances an hour from those that are not, the checks the torture
// test relies on, on histories written by hand.
func TestBookingModel(t *testing.T) {
	m := bookingModel{windows: 2, hours: 4, capacity: 2, terms: map[string]bookingTerms{
		"a": {window: 0, start: 0, end: 2, count: 2},
		"b": {window: 0, start: 1, end: 3, count: 1},
		"c": {window: 0, start: 2, end: 4, count: 2},
		"z": {window: 1, start: 0, end: 4, count: 2},
	}}
	buy := func(token string, call, ret int64, o outcome) porcupine.Operation {
		return porcupine.Operation{Input: bookingInput{op: opPurchase, token: token}, Call: call, Return: ret, Output: bookingOutput{outcome: o}}
	}
	cancel := func(token string, call, ret int64, o outcome) porcupine.Operation {
		return porcupine.Operation{Input: bookingInput{op: opCancel, token: token}, Call: call, Return: ret, Output: bookingOutput{outcome: o}}
	}
	list := func(call, ret int64, tokens ...string) porcupine.Operation {
		return porcupine.Operation{Input: bookingInput{op: opList}, Call: call, Return: ret, Output: bookingOutput{tokens: tokens}}
	}
	get := func(token string, call, ret int64, live bool) porcupine.Operation {
		return porcupine.Operation{Input: bookingInput{op: opGet, token: token}, Call: call, Return: ret, Output: bookingOutput{live: live}}
	}
	tests := map[string]struct {
		history []porcupine.Operation
		want    porcupine.CheckResult
	}{
		"sequential purchases, the second refused": {
			history: []porcupine.Operation{buy("a", 0, 1, outcomeOK), buy("b", 2, 3, outcomeRefused), list(4, 5, "a")},
			want:    porcupine.Ok,
		},
		"double booking": {
			history: []porcupine.Operation{buy("a", 0, 1, outcomeOK), buy("b", 2, 3, outcomeOK)},
			want:    porcupine.Illegal,
		},
		"concurrent purchases, either wins": {
			history: []porcupine.Operation{buy("a", 0, 3, outcomeRefused), buy("b", 1, 2, outcomeOK), list(4, 5, "b")},
			want:    porcupine.Ok,
		},
		"refused with capacity free": {
			history: []porcupine.Operation{buy("b", 0, 1, outcomeRefused)},
			want:    porcupine.Illegal,
		},
		"refused after a cancel freed the capacity": {
			history: []porcupine.Operation{buy("a", 0, 1, outcomeOK), cancel("a", 2, 3, outcomeOK), buy("b", 4, 5, outcomeRefused)},
			want:    porcupine.Illegal,
		},
		"capacity freed by a cancel is sold again": {
			history: []porcupine.Operation{buy("a", 0, 1, outcomeOK), cancel("a", 2, 3, outcomeOK), buy("b", 4, 5, outcomeOK), buy("c", 6, 7, outcomeRefused)},
			want:    porcupine.Ok,
		},
		"an acknowledged purchase lost": {
			history: []porcupine.Operation{buy("a", 0, 1, outcomeOK), list(2, 3)},
			want:    porcupine.Illegal,
		},
		"an acknowledged cancel undone": {
			history: []porcupine.Operation{buy("a", 0, 1, outcomeOK), cancel("a", 2, 3, outcomeOK), get("a", 4, 5, true)},
			want:    porcupine.Illegal,
		},
		"refused while the hours are full": {
			history: []porcupine.Operation{buy("b", 0, 1, outcomeOK), buy("a", 2, 3, outcomeRefused), list(4, 5, "b")},
			want:    porcupine.Ok,
		},
		"an unknown purchase that took effect": {
			history: []porcupine.Operation{buy("a", 0, never, outcomeUnknown), list(2, 3, "a"), buy("b", 4, 5, outcomeRefused)},
			want:    porcupine.Ok,
		},
		"an unknown purchase that did not": {
			history: []porcupine.Operation{buy("a", 0, never, outcomeUnknown), list(2, 3), buy("c", 4, 5, outcomeOK)},
			want:    porcupine.Ok,
		},
		"an unknown purchase seen, then gone without a cancel": {
			history: []porcupine.Operation{buy("a", 0, never, outcomeUnknown), list(2, 3, "a"), list(4, 5)},
			want:    porcupine.Illegal,
		},
		"a cancel of a block already cancelled is refused": {
			history: []porcupine.Operation{buy("a", 0, 1, outcomeOK), cancel("a", 2, 3, outcomeOK), cancel("a", 4, 5, outcomeRefused)},
			want:    porcupine.Ok,
		},
		"windows are apart": {
			history: []porcupine.Operation{buy("a", 0, 1, outcomeOK), buy("z", 0, 1, outcomeOK), list(2, 3, "a", "z")},
			want:    porcupine.Ok,
		},
		"a list that misses another window's block": {
			history: []porcupine.Operation{buy("a", 0, 1, outcomeOK), buy("z", 0, 1, outcomeOK), list(2, 3, "a")},
			want:    porcupine.Illegal,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := porcupine.CheckOperationsTimeout(m.porcupine(), tc.history, 10*time.Second); got != tc.want {
				t.Errorf("porcupine says %s, want %s", got, tc.want)
			}
		})
	}
	// The refusals at which a history stops being linearizable, in turn.
	t.Run("culprits", func(t *testing.T) {
		h := []porcupine.Operation{buy("a", 0, 1, outcomeOK), cancel("a", 2, 3, outcomeOK), buy("b", 4, 5, outcomeRefused),
			list(6, 7), buy("c", 8, 9, outcomeRefused), buy("z", 8, 9, outcomeOK)}
		found, complete := m.culprits(h, time.Minute)
		var got []string
		for _, c := range found {
			got = append(got, c.op.Input.(bookingInput).token)
		}
		if !complete || !slices.Equal(got, []string{"b", "c"}) {
			t.Errorf("culprits %v (complete %v), want the refusals of b and c", got, complete)
		}
	})
	// A refusal that only a later read shows to be wrong: while c's
	// purchase runs, it may explain the refusal, until a read shows that
	// c was not yet bought.
	t.Run("a culprit exposed by a read", func(t *testing.T) {
		m := bookingModel{windows: 1, hours: 1, capacity: 2, terms: map[string]bookingTerms{
			"a": {count: 2, end: 1}, "b": {count: 1, end: 1}, "c": {count: 2, end: 1},
		}}
		h := []porcupine.Operation{buy("a", 0, 10, outcomeOK), cancel("a", 15, 18, outcomeOK), buy("b", 20, 30, outcomeRefused),
			buy("c", 25, 110, outcomeOK), list(40, 50)}
		found, complete := m.culprits(h, time.Minute)
		if !complete || len(found) != 1 || found[0].op.Input.(bookingInput).token != "b" || found[0].exposer == nil ||
			found[0].exposer.Input.(bookingInput).op != opList {
			t.Errorf("culprits %+v (complete %v), want the refusal of b, exposed by the list", found, complete)
		}
	})
	// Refusals taken as possible (all, or those excused) check the rest.
	stale := []porcupine.Operation{buy("a", 0, 1, outcomeOK), cancel("a", 2, 3, outcomeOK), buy("b", 4, 5, outcomeRefused), list(6, 7)}
	lenient := m
	lenient.anyRefusal = true
	excused := m
	excused.excused = map[string]bool{"b": true}
	for name, m := range map[string]bookingModel{"any refusal": lenient, "b excused": excused} {
		t.Run(name, func(t *testing.T) {
			if got := porcupine.CheckOperations(m.porcupine(), stale); !got {
				t.Errorf("a refusal after a cancel is not taken as possible")
			}
			if got := porcupine.CheckOperations(m.porcupine(), append(stale, list(8, 9, "b"))); got {
				t.Errorf("a refused purchase took effect")
			}
		})
	}
}
