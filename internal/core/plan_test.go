package core

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// searchPlan runs a plan search:
// search-plan type=h100.8x count=4 hours=48 after=+0 before=+100 [segments=2] [zone=a] [max-results=6]
func (h *harness) searchPlan(t *testing.T, args map[string]string) string {
	req := PlanSearchRequest{Type: args["type"], Count: atoi(t, args["count"]), Zone: args["zone"],
		Duration:   time.Duration(atoi(t, args["hours"])) * time.Hour,
		StartAfter: h.now.Add(time.Duration(atoi(t, strings.TrimPrefix(args["after"], "+"))) * time.Hour),
		EndBefore:  h.now.Add(time.Duration(atoi(t, strings.TrimPrefix(args["before"], "+"))) * time.Hour),
		Target:     args["target"]}
	if v, ok := args["segments"]; ok {
		req.MaxSegments = atoi(t, v)
	}
	if v, ok := args["max-results"]; ok {
		req.MaxResults = atoi(t, v)
	}
	offers, err := h.ix.SearchPlans(req, h.now)
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	if len(offers) == 0 {
		return "no plan offerings\n"
	}
	var out strings.Builder
	for _, o := range offers {
		fmt.Fprintf(&out, "%s x%d %s %dh fee=%s on-demand=%s:", o.InstanceType, o.Count, o.Zone,
			o.DurationHours(), o.Fee(), o.OnDemandFee())
		for _, s := range o.Segments {
			fmt.Fprintf(&out, " %s..%s(%s)", h.rel(s.Start), h.rel(s.End), s.Fee)
		}
		out.WriteString("\n")
	}
	return out.String()
}

// seg is a segment block of a plan in a state, for the state tests.
func seg(id string, startHour, endHour int, state BlockState) Block {
	t := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	return Block{ID: id, PlanID: "tp-1", Count: 4, State: state,
		Start: t.Add(time.Duration(startHour) * time.Hour), End: t.Add(time.Duration(endHour) * time.Hour)}
}

func TestPlanStateOf(t *testing.T) {
	tests := map[string]struct {
		segments []Block
		want     PlanState
	}{
		"no segment":           {want: PlanPending},
		"all to come":          {segments: []Block{seg("a", 2, 26, StateScheduled), seg("b", 38, 62, StateScheduled)}, want: PlanScheduled},
		"first active":         {segments: []Block{seg("a", 2, 26, StateActive), seg("b", 38, 62, StateScheduled)}, want: PlanActive},
		"between segments":     {segments: []Block{seg("a", 2, 26, StateExpired), seg("b", 38, 62, StateScheduled)}, want: PlanScheduled},
		"second active":        {segments: []Block{seg("a", 2, 26, StateExpired), seg("b", 38, 62, StateActive)}, want: PlanActive},
		"all ended":            {segments: []Block{seg("a", 2, 26, StateExpired), seg("b", 38, 62, StateExpired)}, want: PlanExpired},
		"one cancelled":        {segments: []Block{seg("a", 2, 26, StateActive), seg("b", 38, 62, StateCancelled)}, want: PlanFailed},
		"payment failed":       {segments: []Block{seg("a", 2, 26, StatePaymentFailed)}, want: PlanFailed},
		"failed after expiry":  {segments: []Block{seg("a", 2, 26, StateExpired), seg("b", 38, 62, StateFailed)}, want: PlanFailed},
		"payment pending":      {segments: []Block{seg("a", 2, 26, StatePaymentPending)}, want: PlanScheduled},
		"all cancelled":        {segments: []Block{seg("a", 2, 26, StateCancelled), seg("b", 38, 62, StateCancelled)}, want: PlanCancelled},
		"rest cancelled":       {segments: []Block{seg("a", 2, 26, StateExpired), seg("b", 38, 62, StateCancelled)}, want: PlanCancelled},
		"first cancelled":      {segments: []Block{seg("a", 2, 26, StateCancelled), seg("b", 38, 62, StateScheduled)}, want: PlanFailed},
		"expired after cancel": {segments: []Block{seg("a", 2, 26, StateCancelled), seg("b", 38, 62, StateExpired)}, want: PlanFailed},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := PlanStateOf(tc.segments); got != tc.want {
				t.Errorf("PlanStateOf = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestPlanTransitions(t *testing.T) {
	at := func(h int) time.Time { return seg("x", h, h+1, "").Start }
	segments := []Block{seg("a", 2, 26, StateScheduled), seg("b", 38, 62, StateScheduled)}
	changes := []SegmentChange{
		{BlockID: "a", State: StateActive, At: at(2)},
		{BlockID: "other", State: StateExpired, At: at(3)}, // not a segment: ignored
		{BlockID: "a", State: StateExpired, At: at(26)},
		{BlockID: "b", State: StateActive, At: at(38)},
		{BlockID: "b", State: StateExpired, At: at(62)},
	}
	want := []PlanTransition{
		{From: PlanScheduled, To: PlanActive, At: at(2), BlockID: "a"},
		{From: PlanActive, To: PlanScheduled, At: at(26), BlockID: "a"},
		{From: PlanScheduled, To: PlanActive, At: at(38), BlockID: "b"},
		{From: PlanActive, To: PlanExpired, At: at(62), BlockID: "b"},
	}
	if diff := cmp.Diff(want, PlanTransitions(segments, changes)); diff != "" {
		t.Errorf("PlanTransitions (-want +got):\n%s", diff)
	}
	// The segments passed in are not changed.
	if segments[0].State != StateScheduled {
		t.Errorf("PlanTransitions changed its input: %s", segments[0].State)
	}
	// A change that keeps the derived state emits nothing.
	if got := PlanTransitions(segments[:1], []SegmentChange{{BlockID: "a", State: StateScheduled, At: at(1)}}); len(got) != 0 {
		t.Errorf("no-op change gave %v", got)
	}
}

func TestPlanCapacityOf(t *testing.T) {
	placed := func(b Block, nodes ...string) Block {
		for _, n := range nodes {
			b.Placements = append(b.Placements, Placement{Node: n, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}})
		}
		return b
	}
	unhealthy := func(n string) bool { return n == "n2" }
	tests := map[string]struct {
		segments []Block
		want     PlanCapacity
	}{
		"next segment, before its start": {
			segments: []Block{placed(seg("a", 2, 26, StateScheduled), "n1", "n2", "n3", "n4")},
			want:     PlanCapacity{Total: 4, Unhealthy: 1},
		},
		"active, one node unhealthy": {
			segments: []Block{placed(seg("a", 2, 26, StateActive), "n1", "n2", "n3", "n4"), placed(seg("b", 38, 62, StateScheduled), "n5")},
			want:     PlanCapacity{Total: 4, Available: 3, Unhealthy: 1},
		},
		"between segments: the next one counts": {
			segments: []Block{placed(seg("a", 2, 26, StateExpired), "n2"), placed(seg("b", 38, 62, StateScheduled), "n1", "n3", "n4", "n5")},
			want:     PlanCapacity{Total: 4},
		},
		"all ended": {
			segments: []Block{placed(seg("a", 2, 26, StateExpired), "n1")},
			want:     PlanCapacity{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PlanCapacityOf(tc.segments, 8, unhealthy)); diff != "" {
				t.Errorf("PlanCapacityOf (-want +got):\n%s", diff)
			}
		})
	}
}

func samplePlanOffering() PlanOffering {
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	usd := func(m int64) Money { return Money{Minor: m, Currency: "USD"} }
	return PlanOffering{Target: TargetTrainingJob, InstanceType: "h100.8x", Count: 4, Zone: "zone-a",
		Segments: []PlanSegment{
			{Start: start, End: start.Add(24 * time.Hour), Fee: usd(707808), OnDemandFee: usd(943872)},
			{Start: start.Add(36 * time.Hour), End: start.Add(60 * time.Hour), Fee: usd(700000), OnDemandFee: usd(943872)},
		},
		ExpiresAt: start.Add(-time.Hour)}
}

func TestPlanOfferingRoundTrip(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	o := samplePlanOffering()
	o.Sign(secret)
	if !strings.HasPrefix(o.ID, "tpo-") || len(o.ID) > 160 {
		t.Errorf("plan offering id %q: want tpo- and a short one (%d characters)", o.ID, len(o.ID))
	}
	got, err := VerifyPlanOffering(secret, o.ID, o.ExpiresAt.Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(o, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if o.DurationHours() != 48 || o.Fee().Minor != 1407808 || !o.End().Equal(o.Segments[1].End) {
		t.Errorf("hours %d, fee %s, end %s", o.DurationHours(), o.Fee(), o.End())
	}
}

func TestPlanOfferingRefused(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	o := samplePlanOffering()
	o.Sign(secret)
	before := o.ExpiresAt.Add(-time.Minute)
	flip := func(i int) string {
		b := []byte(o.ID)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	block := sampleOffering()
	block.Sign(secret)
	tests := map[string]struct {
		id     string
		secret string
		now    time.Time
		want   error
	}{
		"expired":            {id: o.ID, now: o.ExpiresAt, want: ErrOfferingExpired},
		"payload tampered":   {id: flip(10), now: before, want: ErrOfferingInvalid},
		"segment tampered":   {id: flip(len(o.ID) - 30), now: before, want: ErrOfferingInvalid},
		"signature tampered": {id: flip(len(o.ID) - 3), now: before, want: ErrOfferingInvalid},
		"other server's":     {id: o.ID, secret: "another secret of 32 bytes......", now: before, want: ErrOfferingInvalid},
		"a block offering":   {id: block.ID, now: before, want: ErrOfferingInvalid},
		"block relabelled":   {id: "tpo-" + block.ID[4:], now: before, want: ErrOfferingInvalid},
		"truncated":          {id: o.ID[:30], now: before, want: ErrOfferingInvalid},
		"empty":              {id: "", now: before, want: ErrOfferingInvalid},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := secret
			if tc.secret != "" {
				s = []byte(tc.secret)
			}
			if _, err := VerifyPlanOffering(s, tc.id, tc.now); !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// FuzzVerifyPlanOffering: no input panics, and nothing verifies unless signed.
func FuzzVerifyPlanOffering(f *testing.F) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	o := samplePlanOffering()
	o.Sign(secret)
	f.Add(o.ID)
	f.Add("tpo-")
	f.Add("tpo-AAAA")
	f.Fuzz(func(t *testing.T, id string) {
		got, err := VerifyPlanOffering(secret, id, time.Time{})
		if err == nil && id != o.ID {
			t.Fatalf("unsigned id %q verified as %+v", id, got)
		}
	})
}

func TestPlanIn(t *testing.T) {
	runs := []hourRun{{1, 13}, {19, 25}, {37, 61}}
	tests := map[string]struct {
		lo, j int
		ps    planSearch
		want  []hourRun
	}{
		"one segment":         {lo: 1, j: 1, ps: planSearch{hours: 20, minHours: 1}, want: []hourRun{{37, 57}}},
		"two: longest before": {lo: 1, j: 2, ps: planSearch{hours: 20, minHours: 1}, want: []hourRun{{1, 13}, {37, 45}}},
		"two: surplus given up from the start": {lo: 1, j: 2, ps: planSearch{hours: 14, minHours: 4},
			want: []hourRun{{3, 13}, {19, 23}}},
		"three segments":      {lo: 1, j: 3, ps: planSearch{hours: 30, minHours: 1}, want: []hourRun{{1, 13}, {19, 25}, {37, 49}}},
		"three finish sooner": {lo: 1, j: 3, ps: planSearch{hours: 20, minHours: 1}, want: []hourRun{{1, 13}, {19, 25}, {37, 39}}},
		"none from lo":        {lo: 50, j: 2, ps: planSearch{hours: 20, minHours: 1}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := planIn(runs, tc.lo, tc.j, tc.ps, 1000)
			if ok != (len(tc.want) > 0) {
				t.Fatalf("planIn = %v, %v; want %v", got, ok, tc.want)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(hourRun{})); diff != "" {
				t.Errorf("planIn (-want +got):\n%s", diff)
			}
		})
	}
	// The lead-time limit applies to every segment's start.
	if got, ok := planIn(runs, 1, 2, planSearch{hours: 20, minHours: 1}, 18); ok {
		t.Errorf("planIn with the last start at hour 18 = %v, want none", got)
	}
}

// BenchmarkSearchPlans: 2 × h100.8x for a week in up to 4 segments, any
// time within 8 weeks, all zones, with about 2 blocks booked per node.
func BenchmarkSearchPlans(b *testing.B) {
	ix := benchIndex(b, 10_000, 2)
	req := PlanSearchRequest{Type: "h100.8x", Count: 2, Duration: 168 * time.Hour, MaxSegments: MaxPlanSegments,
		StartAfter: benchNow, EndBefore: benchNow.Add(8*7*24*time.Hour + 168*time.Hour)}
	b.ReportAllocs()
	for b.Loop() {
		if offers, err := ix.SearchPlans(req, benchNow); err != nil || len(offers) == 0 {
			b.Fatalf("search: %d offerings, %v", len(offers), err)
		}
	}
}
