package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/core"
)

type seriesOccurrence struct {
	StartTime      time.Time `json:"startTime"`
	EndTime        time.Time `json:"endTime"`
	LocalStartTime string    `json:"localStartTime"`
	LocalEndTime   string    `json:"localEndTime"`
	DurationHours  int       `json:"durationHours"`
	Fits           bool      `json:"fits"`
	Reason         string    `json:"reason"`
}

type seriesOffering struct {
	OfferingID  string             `json:"offeringId"`
	Zone        string             `json:"zone"`
	Fitting     int                `json:"fitting"`
	UpfrontFee  money              `json:"upfrontFee"`
	Occurrences []seriesOccurrence `json:"occurrences"`
}

type series struct {
	ID          string `json:"id"`
	Team        string `json:"team"`
	State       string `json:"state"`
	UpfrontFee  money  `json:"upfrontFee"`
	Occurrences []struct {
		BlockID        string    `json:"blockId"`
		StartTime      time.Time `json:"startTime"`
		LocalStartTime string    `json:"localStartTime"`
		State          string    `json:"state"`
	} `json:"occurrences"`
}

type order struct {
	ID      string `json:"id"`
	Team    string `json:"team"`
	State   string `json:"state"`
	BlockID string `json:"blockId"`
	Reason  string `json:"reason"`
}

// setClock moves the simulated clock to t.
func (e *env) setClock(t time.Time) {
	e.t.Helper()
	if code := call(e.t, e.url, "POST", "/v1/admin/clock", map[string]any{"now": ts(t)}, nil); code != 200 {
		e.t.Fatalf("setting the clock: status %d", code)
	}
}

// memberOf makes a team and a member of it and returns the team's id and
// the member's token.
func (e *env) memberOf(name string) (team, token string) {
	e.t.Helper()
	var tm, u struct{ ID string }
	var tok struct{ Token string }
	if code := call(e.t, e.url, "POST", "/v1/teams", map[string]any{"name": name}, &tm); code != 201 {
		e.t.Fatalf("creating team %s: %d", name, code)
	}
	if code := call(e.t, e.url, "POST", "/v1/users", map[string]any{"name": name + "-member", "team": tm.ID, "role": "member"}, &u); code != 201 {
		e.t.Fatalf("creating a member of %s: %d", name, code)
	}
	if code := call(e.t, e.url, "POST", "/v1/users/"+u.ID+"/tokens", map[string]any{}, &tok); code != 201 {
		e.t.Fatalf("creating a token: %d", code)
	}
	return tm.ID, tok.Token
}

func (e *env) seriesOfferings(body map[string]any, token string) []seriesOffering {
	e.t.Helper()
	var out struct {
		SeriesOfferings []seriesOffering `json:"seriesOfferings"`
	}
	if code := call(e.t, e.url, "POST", "/v1/series-offerings", body, &out, token); code != 200 {
		e.t.Fatalf("series search: status %d", code)
	}
	return out.SeriesOfferings
}

// TestSeriesOverHTTP: the workshop (4 × l4.1x every weekday 09:00–17:00
// Europe/Madrid for two weeks) across the change to summer time, bought
// and cancelled by a member; all-or-nothing refuses when one occurrence
// does not fit, partial buys the rest; another team sees nothing.
func TestSeriesOverHTTP(t *testing.T) {
	e := start(t)
	e.setClock(time.Date(2027, 3, 15, 0, 0, 0, 0, time.UTC))
	_, tokA := e.memberOf("workshop")
	_, tokB := e.memberOf("other")
	workshop := map[string]any{"instanceType": "l4.1x", "instanceCount": 4, "daysOfWeek": []string{"weekdays"},
		"startTime": "09:00", "endTime": "17:00", "timeZone": "Europe/Madrid", "fromDate": "2027-03-22", "weeks": 2}

	// 1. Across 2027-03-28: 08:00Z before, 07:00Z after, 8 hours each.
	offers := e.seriesOfferings(workshop, tokA)
	if len(offers) != 1 || offers[0].OfferingID == "" || offers[0].Fitting != 10 {
		t.Fatalf("offerings: %+v", offers)
	}
	var got []string
	for _, oc := range offers[0].Occurrences {
		got = append(got, oc.StartTime.Format("01-02T15:04Z")+" "+oc.LocalStartTime[11:]+" "+time.Duration(oc.DurationHours*int(time.Hour)).String())
	}
	if got[0] != "03-22T08:00Z 09:00:00+01:00 8h0m0s" || got[9] != "04-02T07:00Z 09:00:00+02:00 8h0m0s" {
		t.Errorf("occurrences: %v", got)
	}
	var s series
	if code := call(t, e.url, "POST", "/v1/series", map[string]any{"offeringId": offers[0].OfferingID, "clientToken": "ws", "name": "workshop"}, &s, tokA); code != 201 {
		t.Fatalf("buying the series: status %d", code)
	}
	if len(s.Occurrences) != 10 || s.State != "scheduled" || s.UpfrontFee != offers[0].UpfrontFee {
		t.Fatalf("series: %+v", s)
	}
	// 2. Another team: not found; its list is empty.
	var p problem
	if code := call(t, e.url, "GET", "/v1/series/"+s.ID, nil, &p, tokB); code != 404 || p.Code != "not_found" {
		t.Errorf("another team's GET: %d %s", code, p.Code)
	}
	if code := call(t, e.url, "POST", "/v1/series/"+s.ID+"/cancel", nil, &p, tokB); code != 404 {
		t.Errorf("another team's cancel: %d", code)
	}
	var list struct{ Series []series }
	if code := call(t, e.url, "GET", "/v1/series", nil, &list, tokB); code != 200 || len(list.Series) != 0 {
		t.Errorf("another team's list: %d %d", code, len(list.Series))
	}
	// 3. The pool holds two such series at once; a third finds nothing,
	//    and one more on a Wednesday-free week fits partly.
	offers = e.seriesOfferings(workshop, tokB)
	if code := call(t, e.url, "POST", "/v1/series", map[string]any{"offeringId": offers[0].OfferingID, "clientToken": "ws-b"}, nil, tokB); code != 201 {
		t.Fatalf("buying the second series: status %d", code)
	}
	wed := map[string]any{"instanceType": "l4.1x", "instanceCount": 8, "daysOfWeek": []string{"wed"},
		"startTime": "09:00", "endTime": "17:00", "timeZone": "Europe/Madrid", "fromDate": "2027-04-05", "toDate": "2027-04-07"}
	offers = e.seriesOfferings(wed, tokB)
	if code := call(t, e.url, "POST", "/v1/series", map[string]any{"offeringId": offers[0].OfferingID, "clientToken": "wed"}, nil, tokB); code != 201 {
		t.Fatalf("buying the Wednesday: status %d", code)
	}
	week3 := map[string]any{"instanceType": "l4.1x", "instanceCount": 4, "daysOfWeek": []string{"weekdays"},
		"startTime": "09:00", "endTime": "17:00", "timeZone": "Europe/Madrid", "fromDate": "2027-04-05", "toDate": "2027-04-09"}
	whole := e.seriesOfferings(week3, tokA)[0]
	if whole.OfferingID != "" || whole.Fitting != 4 || whole.Occurrences[2].Fits || whole.Occurrences[2].Reason == "" {
		t.Fatalf("all-or-nothing with Wednesday taken: %+v", whole)
	}
	week3["partial"] = true
	part := e.seriesOfferings(week3, tokA)[0]
	var ps series
	if code := call(t, e.url, "POST", "/v1/series", map[string]any{"offeringId": part.OfferingID, "clientToken": "ws3"}, &ps, tokA); code != 201 || len(ps.Occurrences) != 4 {
		t.Fatalf("partial purchase: status %d, %d occurrences", code, len(ps.Occurrences))
	}
	// 4. Cancel the first series: every occurrence, refunded in full
	//    (the default policy before start).
	var c series
	if code := call(t, e.url, "POST", "/v1/series/"+s.ID+"/cancel", nil, &c, tokA); code != 200 || c.State != "cancelled" {
		t.Fatalf("cancel: status %d, %+v", code, c)
	}
	var led struct {
		Spent money `json:"spent"`
	}
	call(t, e.url, "GET", "/v1/teams/"+s.Team+"/ledger", nil, &led, tokA)
	if led.Spent != part.UpfrontFee {
		t.Errorf("spent %+v after the cancel, want the partial series' %+v", led.Spent, part.UpfrontFee)
	}
}

// hookSink is a webhook receiver that accepts every delivery and keeps
// the event types.
type hookSink struct {
	*httptest.Server
	mu    sync.Mutex
	types []string
}

func newHookSink(t *testing.T) *hookSink {
	h := &hookSink{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev struct{ Type, Subject string }
		json.Unmarshal(body, &ev)
		h.mu.Lock()
		h.types = append(h.types, ev.Type+" "+ev.Subject)
		h.mu.Unlock()
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookSink) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.types...)
}

// TestStandingOrdersOverHTTP: team A fills the L4 pool; team B's buy
// order waits, then team C's; a too-cheap order waits on a free window;
// A cancels and the leader, woken by the cancel, buys B's order (the
// older) and delivers order.bought to B's webhook; C's expires at its
// deadline.
func TestStandingOrdersOverHTTP(t *testing.T) {
	e := start(t)
	runService(t, e)
	_, tokA := e.memberOf("a")
	_, tokB := e.memberOf("b")
	_, tokC := e.memberOf("c")
	sink := newHookSink(t)
	if code := call(t, e.url, "POST", "/v1/webhooks", map[string]any{"url": sink.URL, "events": []string{"order.*"}}, nil, tokB); code != 201 {
		t.Fatalf("webhook: %d", code)
	}
	start := t0.Add(24 * time.Hour)
	var offers struct{ Offerings []offering }
	call(t, e.url, "GET", "/v1/offerings?"+searchQuery("l4.1x", 8, 8, start, start.Add(8*time.Hour)), nil, &offers, tokA)
	if len(offers.Offerings) == 0 {
		t.Fatal("no offering for the whole pool")
	}
	var full block
	if code := call(t, e.url, "POST", "/v1/blocks", map[string]any{"offeringId": offers.Offerings[0].OfferingID, "clientToken": "fill"}, &full, tokA); code != 201 {
		t.Fatalf("filling the pool: %d", code)
	}
	place := func(tok string, maxFee string, from time.Time) order {
		var o order
		body := map[string]any{"mode": "buy", "instanceType": "l4.1x", "instanceCount": 8, "durationHours": 8,
			"startAfter": ts(from), "endBefore": ts(from.Add(8 * time.Hour)), "maxFee": map[string]any{"amount": maxFee, "currency": "USD"}}
		if code := call(t, e.url, "POST", "/v1/orders", body, &o, tok); code != 201 || o.State != "open" {
			t.Fatalf("placing an order: %d %+v", code, o)
		}
		return o
	}
	ob := place(tokB, "10000.00", start)
	e.sim.Set(e.sim.Now().Add(time.Second)) // C's order comes later
	oc := place(tokC, "10000.00", start)
	cheap := place(tokC, "0.01", start.Add(48*time.Hour))
	get := func(tok, id string) order {
		var o order
		if code := call(t, e.url, "GET", "/v1/orders/"+id, nil, &o, tok); code != 200 {
			t.Fatalf("GET order %s: %d", id, code)
		}
		return o
	}
	wait := func(tok, id string, cond func(order) bool) order {
		var o order
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if o = get(tok, id); cond(o) {
				return o
			}
		}
		t.Fatalf("order %s never got there: %+v", id, o)
		return o
	}
	wait(tokC, cheap.ID, func(o order) bool { return o.Reason != "" })
	if o := get(tokC, cheap.ID); o.State != "open" || o.BlockID != "" {
		t.Errorf("an order above its maxFee: %+v", o)
	}
	var p problem
	if code := call(t, e.url, "GET", "/v1/orders/"+ob.ID, nil, &p, tokC); code != 404 {
		t.Errorf("another team's order: %d", code)
	}

	if code := call(t, e.url, "POST", "/v1/blocks/"+full.ID+"/cancel", nil, nil, tokA); code != 200 {
		t.Fatalf("cancelling A's block: %d", code)
	}
	bought := wait(tokB, ob.ID, func(o order) bool { return o.State == "bought" })
	var b block
	if code := call(t, e.url, "GET", "/v1/blocks/"+bought.BlockID, nil, &b, tokB); code != 200 || b.InstanceCount != 8 || !b.StartTime.Equal(start) {
		t.Errorf("B's block: %d %+v", code, b)
	}
	if o := get(tokC, oc.ID); o.State != "open" {
		t.Errorf("C's later order: %+v, want still open", o)
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && len(sink.got()) < 2; time.Sleep(20 * time.Millisecond) {
	}
	if diff := cmp.Diff([]string{core.EventOrderCreated + " " + ob.ID, core.EventOrderBought + " " + ob.ID}, sink.got()); diff != "" {
		t.Errorf("B's webhook deliveries (-want +got):\n%s", diff)
	}

	e.setClock(start)
	wait(tokC, oc.ID, func(o order) bool { return o.State == "expired" })
}
