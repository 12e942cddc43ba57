package e2e

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// stall is where porcupine's longest partial linearization of a window
// that it could not linearize stops.
type stall struct {
	window int
	part   []porcupine.Operation // the window's history
	placed []porcupine.Operation // the longest partial linearization
	state  *bookedState          // the state it reaches
	next   porcupine.Operation   // the first to return of those left, which cannot come next
}

// stalls returns where the linearization of each window that porcupine
// could not linearize stops. ops is the history checked, info
// porcupine's account of it.
func (m bookingModel) stalls(ops []porcupine.Operation, info porcupine.LinearizationInfo) []stall {
	var out []stall
	parts := m.partition(ops)
	partials := info.PartialLinearizationsOperations()
	for w, part := range parts {
		if w >= len(partials) {
			break
		}
		var longest []porcupine.Operation
		for _, p := range partials[w] {
			if len(p) > len(longest) {
				longest = p
			}
		}
		if len(longest) == len(part) {
			continue
		}
		var state any = newBookedState(nil)
		placed := map[string]bool{}
		for _, op := range longest {
			_, state = m.step(state, op.Input, op.Output)
			placed[opKey(op)] = true
		}
		var left []porcupine.Operation
		for _, op := range part {
			if !placed[opKey(op)] {
				left = append(left, op)
			}
		}
		slices.SortFunc(left, func(a, b porcupine.Operation) int { return cmpInt64(a.Return, b.Return) })
		out = append(out, stall{window: w, part: part, placed: longest, state: state.(*bookedState), next: left[0]})
	}
	return out
}

// explain says where a window's linearization stops: the state reached,
// the operation that cannot come next, what ran at the same time, the
// last changes to its hours and the last operations placed.
func (m bookingModel) explain(st stall) string {
	var b strings.Builder
	fmt.Fprintf(&b, "window %d: %d of %d operations linearized; then, at state %s,\n  %s cannot come next\n",
		st.window, len(st.placed), len(st.part), m.describe(st.state), m.describeOp(st.next))
	b.WriteString("  at the same time:\n")
	for _, op := range st.part {
		if op.Call <= st.next.Return && op.Return >= st.next.Call && opKey(op) != opKey(st.next) {
			fmt.Fprintf(&b, "    %s\n", m.describeOp(op))
		}
	}
	if in := st.next.Input.(bookingInput); in.op == opPurchase {
		b.WriteString("  the last changes placed to its hours:\n")
		var changes []porcupine.Operation
		for _, op := range st.placed {
			if m.changes(op, m.terms[in.token]) {
				changes = append(changes, op)
			}
		}
		for _, op := range changes[max(0, len(changes)-6):] {
			fmt.Fprintf(&b, "    %s\n", m.describeOp(op))
		}
	}
	b.WriteString("  the last operations placed:\n")
	for _, op := range st.placed[max(0, len(st.placed)-8):] {
		fmt.Fprintf(&b, "    %s\n", m.describeOp(op))
	}
	return b.String()
}

// culprit is an operation at whose return a window's history stops
// being linearizable: the history up to just before it is, with it it
// is not.
type culprit struct {
	window  int
	op      porcupine.Operation
	exposer *porcupine.Operation  // when set, the later operation at whose return the history stopped being linearizable
	part    []porcupine.Operation // the window's history
}

// culprits finds, window by window, the operation at whose return the
// history stops being linearizable, excuses it when it is a refusal for
// no capacity and looks for the next, until the window is linearizable,
// the culprit is something else, or budget is spent (complete false).
func (m bookingModel) culprits(ops []porcupine.Operation, budget time.Duration) (found []culprit, complete bool) {
	deadline := time.Now().Add(budget)
	m.excused = map[string]bool{}
	whole := m.porcupine()
	whole.Partition = nil
	linearizable := func(part []porcupine.Operation, at int64) (bool, bool) {
		res := porcupine.CheckOperationsTimeout(whole, prefix(part, at), time.Until(deadline))
		return res == porcupine.Ok, res == porcupine.Unknown
	}
	for w, part := range m.partition(ops) {
		returns := make([]int64, 0, len(part))
		for _, op := range part {
			if op.Return != never {
				returns = append(returns, op.Return)
			}
		}
		slices.Sort(returns)
		returns = append(returns, never)
		from := 0
		for {
			if time.Now().After(deadline) {
				return found, false
			}
			// The first return after which the prefix is not linearizable:
			// a prefix that is not stays so as it grows.
			ok, timedOut := linearizable(part, never)
			if timedOut {
				return found, false
			}
			if ok {
				break
			}
			lo, hi := from, len(returns)-1
			for lo < hi {
				mid := (lo + hi) / 2
				ok, timedOut := linearizable(part, returns[mid])
				if timedOut {
					return found, false
				}
				if ok {
					lo = mid + 1
				} else {
					hi = mid
				}
			}
			var c porcupine.Operation
			for _, op := range part {
				if op.Return == returns[lo] {
					c = op
				}
			}
			// The refusal to excuse: c itself, or one that returned
			// before it and that c (a read, most often) shows to be
			// wrong; the latest whose excuse alone makes the history up
			// to c linearizable again.
			var candidates []porcupine.Operation
			for _, op := range part {
				if refused(op) && op.Return <= c.Return && !m.excused[op.Input.(bookingInput).token] {
					candidates = append(candidates, op)
				}
			}
			slices.SortFunc(candidates, func(a, b porcupine.Operation) int { return cmpInt64(b.Return, a.Return) })
			excused := false
			for _, r := range candidates[:min(len(candidates), 32)] {
				token := r.Input.(bookingInput).token
				m.excused[token] = true
				ok, timedOut := linearizable(part, returns[lo])
				if timedOut {
					return found, false
				}
				if ok {
					f := culprit{window: w, op: r, part: part}
					if opKey(r) != opKey(c) {
						f.exposer = &c
					}
					found = append(found, f)
					excused = true
					break
				}
				delete(m.excused, token)
			}
			if !excused {
				return append(found, culprit{window: w, op: c, part: part}), true
			}
			from = lo
		}
	}
	return found, true
}

// freedBefore returns the refusal's last request, and the cancel of
// some of its hours that returned last before that request was sent.
func (m bookingModel) freedBefore(c culprit) (attempt, porcupine.Operation, bool) {
	as, _ := c.op.Metadata.(attempts)
	if len(as) == 0 {
		return attempt{}, porcupine.Operation{}, false
	}
	last := as[len(as)-1]
	var freeing porcupine.Operation
	found := false
	for _, op := range c.part {
		in := op.Input.(bookingInput)
		if in.op == opCancel && op.Output.(bookingOutput).outcome == outcomeOK && op.Return < last.at &&
			m.changes(op, m.terms[c.op.Input.(bookingInput).token]) && (!found || op.Return > freeing.Return) {
			freeing, found = op, true
		}
	}
	return last, freeing, found
}

// refused reports whether op is a purchase refused for no capacity.
func refused(op porcupine.Operation) bool {
	return op.Input.(bookingInput).op == opPurchase && op.Output.(bookingOutput).outcome == outcomeRefused
}

// prefix is what a window's history says up to time at: the operations
// called by then, those still running taken as never answered (a read
// left out: it changes nothing).
func prefix(part []porcupine.Operation, at int64) []porcupine.Operation {
	var out []porcupine.Operation
	for _, op := range part {
		switch {
		case op.Call > at:
		case op.Return <= at:
			out = append(out, op)
		case op.Input.(bookingInput).op == opPurchase || op.Input.(bookingInput).op == opCancel:
			op.Return = never
			op.Output = bookingOutput{outcome: outcomeUnknown}
			out = append(out, op)
		}
	}
	return out
}

// explainCulprit says what the culprit saw and what ran before it: the
// changes to its hours that returned before it was called, the last
// ones, and what ran at the same time.
func (m bookingModel) explainCulprit(c culprit) string {
	var b strings.Builder
	fmt.Fprintf(&b, "window %d: the history is linearizable until\n  %s\n", c.window, m.describeOp(c.op))
	if c.exposer != nil {
		fmt.Fprintf(&b, "  (which becomes clear when this returns: %s)\n", m.describeOp(*c.exposer))
	}
	var before []porcupine.Operation
	for _, op := range c.part {
		if op.Return < c.op.Call && m.changes(op, m.terms[c.op.Input.(bookingInput).token]) {
			before = append(before, op)
		}
	}
	slices.SortFunc(before, func(a, b porcupine.Operation) int { return cmpInt64(a.Return, b.Return) })
	b.WriteString("  the last changes to its hours before it:\n")
	for _, op := range before[max(0, len(before)-4):] {
		fmt.Fprintf(&b, "    %s\n", m.describeOp(op))
	}
	b.WriteString("  at the same time:\n")
	for _, op := range c.part {
		if op.Call <= c.op.Return && op.Return >= c.op.Call && opKey(op) != opKey(c.op) {
			fmt.Fprintf(&b, "    %s\n", m.describeOp(op))
		}
	}
	return b.String()
}

// changes reports whether op bought or cancelled capacity in any hour
// of t.
func (m bookingModel) changes(op porcupine.Operation, t bookingTerms) bool {
	in, out := op.Input.(bookingInput), op.Output.(bookingOutput)
	if in.op != opPurchase && in.op != opCancel || out.outcome == outcomeRefused {
		return false
	}
	u := m.terms[in.token]
	return u.start < t.end && t.start < u.end
}

// opKey identifies an operation of a partition.
func opKey(op porcupine.Operation) string {
	return fmt.Sprintf("%d/%d/%d/%v", op.ClientId, op.Call, op.Return, op.Input)
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// describe names a state's live blocks and the instances booked in
// each hour of the window.
func (m bookingModel) describe(s *bookedState) string {
	used := make([]int, m.hours)
	for _, tok := range s.tokens {
		t := m.terms[tok]
		for h := t.start; h < t.end; h++ {
			used[h] += t.count
		}
	}
	var blocks []string
	for _, tok := range s.tokens {
		t := m.terms[tok]
		blocks = append(blocks, fmt.Sprintf("%s %d×%d-%d", tok, t.count, t.start, t.end))
	}
	return fmt.Sprintf("{%s} booked by hour %v", strings.Join(blocks, ", "), used)
}

// describeOp is an operation with its times (seconds into the run) and
// where it was answered.
func (m bookingModel) describeOp(op porcupine.Operation) string {
	ret := "never"
	if op.Return != never {
		ret = fmt.Sprintf("%.6fs", time.Duration(op.Return).Seconds())
	}
	desc := m.porcupine().DescribeOperation(op.Input, op.Output)
	if op.Metadata != nil {
		desc += fmt.Sprintf(" [%v]", op.Metadata)
	}
	return fmt.Sprintf("client %d, %.6fs..%s: %s", op.ClientId, time.Duration(op.Call).Seconds(), ret, desc)
}
