package e2e

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type planOffering struct {
	OfferingID    string `json:"offeringId"`
	Target        string `json:"target"`
	DurationHours int    `json:"durationHours"`
	UpfrontFee    money  `json:"upfrontFee"`
	Segments      []struct {
		InstanceType  string    `json:"instanceType"`
		InstanceCount int       `json:"instanceCount"`
		Zone          string    `json:"zone"`
		StartTime     time.Time `json:"startTime"`
		EndTime       time.Time `json:"endTime"`
		DurationHours int       `json:"durationHours"`
		UpfrontFee    money     `json:"upfrontFee"`
	} `json:"segments"`
}

type plan struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Target   string `json:"target"`
	State    string `json:"state"`
	Segments []struct {
		BlockID   string    `json:"blockId"`
		State     string    `json:"state"`
		StartTime time.Time `json:"startTime"`
		EndTime   time.Time `json:"endTime"`
	} `json:"segments"`
	UpfrontFee money `json:"upfrontFee"`
	Total      int   `json:"total"`
	Available  int   `json:"available"`
	InUse      int   `json:"inUse"`
	Unhealthy  int   `json:"unhealthy"`
}

func planQuery(typ string, count, hours, maxSegments int, after, before time.Time) string {
	return fmt.Sprintf("instanceType=%s&instanceCount=%d&durationHours=%d&maxSegments=%d&target=training-job&startAfter=%s&endBefore=%s",
		typ, count, hours, maxSegments, url.QueryEscape(ts(after)), url.QueryEscape(ts(before)))
}

func (e *env) planOfferings(query string) []planOffering {
	e.t.Helper()
	var out struct {
		PlanOfferings []planOffering `json:"planOfferings"`
	}
	if code := call(e.t, e.url, "GET", "/v1/plan-offerings?"+query, nil, &out); code != 200 {
		e.t.Fatalf("plan search %s: status %d", query, code)
	}
	return out.PlanOfferings
}

func (e *env) plan(id string) plan {
	e.t.Helper()
	var p plan
	if code := call(e.t, e.url, "GET", "/v1/plans/"+id, nil, &p); code != 200 {
		e.t.Fatalf("GET plan %s: status %d", id, code)
	}
	return p
}

// block8 buys all 8 H100 nodes from start for hours, as a blocker.
func (e *env) block8(start time.Time, hours int, token string) {
	e.t.Helper()
	o := e.exact(searchQuery("h100.8x", 8, hours, start, start.Add(time.Duration(hours)*time.Hour)), hours, start)
	if _, code := e.buy(o.OfferingID, token); code != 201 {
		e.t.Fatalf("buying the blocker %s: status %d", token, code)
	}
}

// splitPool books the whole H100 pool over [26h, 38h) and [62h, 80h) from
// t0: 48 contiguous hours of 4 instances do not fit in [2h, 80h), but
// [2h, 26h) and [38h, 62h) do.
func splitPool(e *env) {
	e.block8(t0.Add(26*time.Hour), 12, "blocker-1")
	e.block8(t0.Add(62*time.Hour), 18, "blocker-2")
}

var splitQuery = planQuery("h100.8x", 4, 48, 2, t0.Add(2*time.Hour), t0.Add(80*time.Hour))

// TestPlanSegments buys a 48-hour plan that only fits as two segments
// with a gap, and follows it through its life on the simulated clock.
func TestPlanSegments(t *testing.T) {
	e := start(t)
	splitPool(e)
	if got := e.planOfferings(planQuery("h100.8x", 4, 48, 1, t0.Add(2*time.Hour), t0.Add(80*time.Hour))); len(got) != 0 {
		t.Fatalf("one segment of 48h fits: %+v", got)
	}
	offers := e.planOfferings(splitQuery)
	if len(offers) == 0 {
		t.Fatal("no plan offering for 48h in two segments")
	}
	o := offers[0]
	type window struct{ From, To, Hours int }
	var got []window
	for _, s := range o.Segments {
		got = append(got, window{int(s.StartTime.Sub(t0) / time.Hour), int(s.EndTime.Sub(t0) / time.Hour), s.DurationHours})
	}
	if diff := cmp.Diff([]window{{2, 26, 24}, {38, 62, 24}}, got); diff != "" || o.DurationHours != 48 || o.Target != "training-job" {
		t.Fatalf("offering %s, %dh, target %s; segments (-want +got):\n%s", o.OfferingID, o.DurationHours, o.Target, diff)
	}

	// 1. Buy: both segments become scheduled blocks of the plan.
	var p plan
	body := map[string]any{"offeringId": o.OfferingID, "name": "llama", "clientToken": "plan-1"}
	if code := call(t, e.url, "POST", "/v1/plans", body, &p); code != 201 {
		t.Fatalf("buying the plan: status %d", code)
	}
	if p.State != "scheduled" || len(p.Segments) != 2 || p.Total != 4 || p.Available != 0 || p.UpfrontFee != o.UpfrontFee {
		t.Fatalf("bought plan: %+v", p)
	}
	for i, s := range p.Segments {
		b, err := e.store.GetBlock(context.Background(), s.BlockID)
		if err != nil || b.PlanID != p.ID || b.State != "scheduled" || b.Count != 4 || !b.Start.Equal(o.Segments[i].StartTime) {
			t.Fatalf("segment %d block %s: %+v, %v", i+1, s.BlockID, b, err)
		}
		var wire struct{ PlanID string }
		if code := call(t, e.url, "GET", "/v1/blocks/"+s.BlockID, nil, &wire); code != 200 || wire.PlanID != p.ID {
			t.Fatalf("GET block %s: %d, planId %q", s.BlockID, code, wire.PlanID)
		}
	}
	// Price honesty: each segment is charged its quoted fee.
	ledger, err := e.store.Ledger(context.Background(), e.team)
	if err != nil {
		t.Fatal(err)
	}
	charged := map[string]string{}
	for _, l := range ledger {
		charged[l.Subject] = l.Amount.String()
	}
	for i, s := range p.Segments {
		if charged[s.BlockID] != o.Segments[i].UpfrontFee.Amount {
			t.Errorf("segment %d charged %q, quoted %s", i+1, charged[s.BlockID], o.Segments[i].UpfrontFee.Amount)
		}
	}

	// 2. A retry returns the same plan; the token with other parameters,
	//    or a tampered offering, is refused; nothing more is stored.
	var again plan
	if code := call(t, e.url, "POST", "/v1/plans", body, &again); code != 200 || again.ID != p.ID {
		t.Fatalf("replay: status %d, plan %s, want 200 and %s", code, again.ID, p.ID)
	}
	var pr problem
	other := map[string]any{"offeringId": o.OfferingID, "name": "other", "clientToken": "plan-1"}
	if code := call(t, e.url, "POST", "/v1/plans", other, &pr); code != 409 || pr.Code != "idempotency_mismatch" {
		t.Fatalf("same token, other name: status %d, code %q", code, pr.Code)
	}
	tampered := []byte(o.OfferingID)
	tampered[12] ^= 1
	if code := call(t, e.url, "POST", "/v1/plans", map[string]any{"offeringId": string(tampered), "clientToken": "plan-2"}, &pr); code != 400 || pr.Code != "offering_invalid" {
		t.Fatalf("tampered: status %d, code %q", code, pr.Code)
	}
	if n := liveBlocks(t, e.db); n != 4 {
		t.Fatalf("%d live blocks, want the 2 blockers and 2 segments", n)
	}
	var list struct{ Plans []plan }
	if code := call(t, e.url, "GET", "/v1/plans", nil, &list); code != 200 || len(list.Plans) != 1 || list.Plans[0].ID != p.ID {
		t.Fatalf("GET /v1/plans: %d %+v", code, list)
	}

	// 3. Its life: active, scheduled between segments, active, expired.
	steps := []struct {
		advance          time.Duration
		state            string
		total, available int
	}{
		{2 * time.Hour, "active", 4, 4},     // t0+2h: segment 1 starts
		{24 * time.Hour, "scheduled", 4, 0}, // t0+26h: the gap
		{12 * time.Hour, "active", 4, 4},    // t0+38h: segment 2 starts
		{24 * time.Hour, "expired", 0, 0},   // t0+62h: the end
	}
	for _, st := range steps {
		e.advance(st.advance)
		got := e.plan(p.ID)
		if got.State != st.state || got.Total != st.total || got.Available != st.available || got.InUse != 0 || got.Unhealthy != 0 {
			t.Fatalf("at %s: state %s, total %d, available %d; want %s, %d, %d", e.sim.Now().Sub(t0), got.State, got.Total, got.Available,
				st.state, st.total, st.available)
		}
	}
	var planEvents []string
	for _, ev := range e.events() {
		if ev.Subject == p.ID {
			planEvents = append(planEvents, ev.Type)
		}
	}
	want := []string{"plan.scheduled", "plan.active", "plan.scheduled", "plan.active", "plan.expired"}
	if diff := cmp.Diff(want, planEvents); diff != "" {
		t.Errorf("plan events (-want +got):\n%s", diff)
	}
	assertNoOverlap(t, e.db)
}

// TestPlanSegmentGone: when a segment's capacity is sold after the quote,
// buying the plan answers no_capacity and stores nothing, not even the
// segment that still fits.
func TestPlanSegmentGone(t *testing.T) {
	e := start(t)
	splitPool(e)
	o := e.planOfferings(splitQuery)[0]
	// Another buyer takes 5 of the 8 nodes during the second segment.
	taken := e.exact(searchQuery("h100.8x", 5, 24, t0.Add(38*time.Hour), t0.Add(62*time.Hour)), 24, t0.Add(38*time.Hour))
	if _, code := e.buy(taken.OfferingID, "taker"); code != 201 {
		t.Fatalf("buying the second segment's capacity: status %d", code)
	}
	var pr problem
	if code := call(t, e.url, "POST", "/v1/plans", map[string]any{"offeringId": o.OfferingID, "clientToken": "plan-1"}, &pr); code != 409 || pr.Code != "no_capacity" {
		t.Fatalf("buying the plan: status %d, code %q (%s), want 409 no_capacity", code, pr.Code, pr.Detail)
	}
	var list struct{ Plans []plan }
	if code := call(t, e.url, "GET", "/v1/plans", nil, &list); code != 200 || len(list.Plans) != 0 {
		t.Fatalf("plans after a refused purchase: %d %+v", code, list.Plans)
	}
	if n := liveBlocks(t, e.db); n != 3 {
		t.Fatalf("%d live blocks, want the 2 blockers and the taker's", n)
	}
	// The first segment's window is still wholly free.
	e.block8(t0.Add(2*time.Hour), 24, "first-window")
	// And a stale quote is refused as such.
	e.advance(11 * time.Minute)
	if code := call(t, e.url, "POST", "/v1/plans", map[string]any{"offeringId": o.OfferingID, "clientToken": "plan-2"}, &pr); code != 410 || pr.Code != "offering_expired" {
		t.Fatalf("expired: status %d, code %q", code, pr.Code)
	}
	assertNoOverlap(t, e.db)
}

// planOffering quotes a one-segment plan of one l4.1x for an hour, each
// call at another hour so the pool never runs dry.
func (f *authzFixture) planOffering() string {
	s := t0.Add(time.Duration(2+f.n.Add(1)%1000) * time.Hour)
	offers := f.e.planOfferings(planQuery("l4.1x", 1, 1, 1, s, s.Add(time.Hour)))
	if len(offers) == 0 {
		f.e.t.Fatalf("no plan offering at %s", s)
	}
	return offers[0].OfferingID
}

// plan buys a fresh plan for a team, as the admin.
func (f *authzFixture) plan(team string) string {
	var p plan
	body := map[string]any{"offeringId": f.planOffering(), "clientToken": fmt.Sprintf("authz-plan-%d", f.n.Add(1)), "team": team}
	if code := call(f.e.t, f.e.url, "POST", "/v1/plans", body, &p); code != 201 {
		f.e.t.Fatalf("buying a plan for %s: %d", team, code)
	}
	return p.ID
}
