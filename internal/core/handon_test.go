package core

import (
	"errors"
	"testing"
	"time"
)

var hoT0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func hoHour(h int) time.Time { return hoT0.Add(time.Duration(h) * time.Hour) }

func hoBlock(state BlockState, from, to int) Block {
	return Block{ID: "cb-1", Team: "a", State: state, Start: hoHour(from), End: hoHour(to),
		Fee: Money{Minor: 80_000, Currency: "USD"}, Placements: []Placement{{Node: "n0", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}
}

func TestHandOnFrom(t *testing.T) {
	l := DefaultLimits()
	plan := hoBlock(StateScheduled, 2, 10)
	plan.PlanID = "tp-1"
	ending := hoBlock(StateActive, 0, 4)
	for name, c := range map[string]struct {
		b    Block
		now  time.Time
		want time.Time
		err  error
	}{
		"before the start: the whole block":   {hoBlock(StateScheduled, 2, 10), hoHour(1), hoHour(2), nil},
		"active: from the next whole hour":    {hoBlock(StateActive, 2, 10), hoHour(4).Add(30 * time.Minute), hoHour(5), nil},
		"active on the hour: the next one":    {hoBlock(StateActive, 2, 10), hoHour(4), hoHour(5), nil},
		"not yet activated, started":          {hoBlock(StateScheduled, 2, 10), hoHour(3), hoHour(4), nil},
		"the last hour: nothing to hand on":   {hoBlock(StateActive, 2, 10), hoHour(9).Add(10 * time.Minute), time.Time{}, ErrInvalidState},
		"a plan's segment":                    {plan, hoHour(1), time.Time{}, ErrInvalidState},
		"waiting for approval":                {hoBlock(StatePaymentPending, 2, 10), hoHour(1), time.Time{}, ErrInvalidState},
		"cancelled":                           {hoBlock(StateCancelled, 2, 10), hoHour(1), time.Time{}, ErrInvalidState},
		"terminating":                         {func() Block { b := ending; b.Terminating = true; return b }(), hoHour(2), time.Time{}, ErrInvalidState},
		"the hand-over after the termination": {hoBlock(StateActive, 0, 4), hoHour(3).Add(-10 * time.Minute), hoHour(3), nil},
	} {
		got, err := HandOnFrom(c.b, c.now, l)
		if !errors.Is(err, c.err) || (c.err == nil && err != nil) || !got.Equal(c.want) {
			t.Errorf("%s: %s, %v; want %s, %v", name, got, err, c.want, c.err)
		}
	}
}

func TestKeepUntilAndReceived(t *testing.T) {
	b := hoBlock(StateActive, 2, 10)
	if k := KeepUntil(b, hoHour(5)); k.State != StateActive || !k.End.Equal(hoHour(5)) || k.Fee != b.Fee {
		t.Errorf("kept %+v; want active until hour 5 with its fee", k)
	}
	if k := KeepUntil(b, hoHour(2)); k.State != StateCancelled || !k.End.Equal(hoHour(10)) {
		t.Errorf("kept nothing: %+v; want cancelled", k)
	}
	r := Received(b, hoHour(5), "cb-2", "b", Money{Minor: 5, Currency: "USD"}, hoHour(4))
	if r.Team != "b" || r.State != StateScheduled || !r.Start.Equal(hoHour(5)) || !r.End.Equal(hoHour(10)) || r.GPUs() != 8 || r.Fee.Minor != 5 {
		t.Errorf("received %+v", r)
	}
}

func TestOverlapGPUHours(t *testing.T) {
	a := []Placement{{Node: "n0", GPUs: []int{0, 1, 2, 3}}, {Node: "n1", GPUs: []int{0}}}
	b := []Placement{{Node: "n0", GPUs: []int{2, 3, 4}}, {Node: "n2", GPUs: []int{0}}}
	if got := OverlapGPUHours(a, hoHour(0), hoHour(10), b, hoHour(4), hoHour(20)); got != 2*6 {
		t.Errorf("overlap %d; want 12 (GPUs 2 and 3 of n0 for hours 4 to 10)", got)
	}
	if got := OverlapGPUHours(a, hoHour(0), hoHour(4), b, hoHour(4), hoHour(20)); got != 0 {
		t.Errorf("back to back: %d; want 0", got)
	}
	if got := GPUHours(a, hoHour(0), hoHour(10)); got != 50 {
		t.Errorf("GPUHours %d; want 50", got)
	}
}

// TestResaleCredit: credits in pieces sum to the credit of the whole, to
// the cent, and the fee is kept.
func TestResaleCredit(t *testing.T) {
	fee := Money{Minor: 93_381, Currency: "USD"}
	whole := ResaleCredit(fee, 80, 0, 80, 10)
	if whole.Minor != 93_381*90/100 {
		t.Errorf("all resold: %d; want %d", whole.Minor, 93_381*90/100)
	}
	var sum int64
	for x := int64(0); x < 80; x += 7 {
		sum += ResaleCredit(fee, 80, x, min(x+7, 80), 10).Minor
	}
	if sum != whole.Minor {
		t.Errorf("credits in pieces sum to %d; want %d", sum, whole.Minor)
	}
	if got := ResaleCredit(fee, 0, 0, 8, 10); got.Minor != 0 {
		t.Errorf("nothing bought: %d", got.Minor)
	}
}

func TestBlockUtilisation(t *testing.T) {
	b := hoBlock(StateActive, 0, 168)
	runs := []RunSpan{
		{BlockID: "cb-1", GPUs: 8, Start: hoHour(10), End: hoHour(30)},
		{BlockID: "cb-1", GPUs: 4, Start: hoHour(100)}, // runs still
		{BlockID: "cb-other", GPUs: 8, Start: hoHour(0), End: hoHour(50)},
	}
	const h = 3600
	for name, c := range map[string]struct {
		b             Block
		from, to, now time.Time
		want          Utilisation
	}{
		"so far":    {b, time.Time{}, time.Time{}, hoHour(120), Utilisation{Reserved: 960 * h, Used: (160 + 80) * h, Idle: 720 * h}},
		"a window":  {b, hoHour(20), hoHour(40), hoHour(120), Utilisation{Reserved: 160 * h, Used: 80 * h, Idle: 80 * h}},
		"not begun": {b, time.Time{}, time.Time{}, hoHour(-1), Utilisation{}},
		"cancelled": {hoBlock(StateCancelled, 0, 168), time.Time{}, time.Time{}, hoHour(120), Utilisation{}},
		"after the end": {b, time.Time{}, time.Time{}, hoHour(200),
			Utilisation{Reserved: 1344 * h, Used: (160 + 4*68) * h, Idle: (1344 - 160 - 272) * h}},
	} {
		if got := BlockUtilisation(c.b, runs, c.from, c.to, c.now); got != c.want {
			t.Errorf("%s: %+v; want %+v", name, got, c.want)
		}
	}
}
