package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"capblock/internal/core"
	"capblock/internal/service"
)

// forger signs quotes with the server's own secret, as whoever held a
// leaked signing key could.
type forger struct {
	t      *testing.T
	secret []byte
}

func newForger(e *env) forger {
	secret, err := service.SigningSecret(context.Background(), e.store, e.key, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return forger{t: e.t, secret: secret}
}

// block signs a quote for one h100.8x over [start, start+4h) at fee
// (in cents), valid for 10 minutes from t0 (the simulated clock's start).
func (f forger) block(start time.Time, fee int64) string {
	o := core.Offering{Kind: core.KindBlock, InstanceType: "h100.8x", Count: 1, Zone: "zone-a",
		Start: start, End: start.Add(4 * time.Hour), Fee: core.Money{Minor: fee, Currency: "USD"},
		OnDemandFee: core.Money{Minor: 39328, Currency: "USD"}, ExpiresAt: t0.Add(10 * time.Minute)}
	o.Sign(f.secret)
	return o.ID
}

// plan signs a plan quote of one h100.8x: a segment of 4 hours from each
// start, with the fees given.
func (f forger) plan(starts []time.Time, fees []int64) string {
	o := core.PlanOffering{Target: "training-job", InstanceType: "h100.8x", Count: 1, Zone: "zone-a",
		ExpiresAt: t0.Add(10 * time.Minute)}
	for i, s := range starts {
		o.Segments = append(o.Segments, core.PlanSegment{Start: s, End: s.Add(4 * time.Hour),
			Fee: core.Money{Minor: fees[i], Currency: "USD"}, OnDemandFee: core.Money{Minor: 39328, Currency: "USD"}})
	}
	o.Sign(f.secret)
	return o.ID
}

// extension signs a quote extending block b by 2 hours at fee.
func (f forger) extension(b block, fee int64) string {
	o := core.Offering{Kind: core.KindExtension, BlockID: b.ID, InstanceType: "h100.8x", Count: 1, Zone: "zone-a",
		Start: b.EndTime, End: b.EndTime.Add(2 * time.Hour), Fee: core.Money{Minor: fee, Currency: "USD"},
		OnDemandFee: core.Money{Minor: 19664, Currency: "USD"}, ExpiresAt: t0.Add(10 * time.Minute)}
	o.Sign(f.secret)
	return o.ID
}

// TestForgedQuotesRefused: a quote signed with the server's key still
// buys nothing that no search returns: a start already past (410
// offering_expired), a start off the hour or a fee that is not positive
// (400 offering_invalid), for blocks, plans and extensions alike. A
// forged quote with sound terms buys, which shows that the refusals are
// the terms' and not the signature's.
func TestForgedQuotesRefused(t *testing.T) {
	e := start(t)
	f := newForger(e)
	e.advance(3 * time.Minute) // the quotes are still fresh; t0 is past
	on := t0.Add(2 * time.Hour)
	tests := map[string]struct {
		path, id     string
		status       int
		code, detail string
	}{
		"block starting in the past": {path: "/v1/blocks", id: f.block(t0, 100_00), status: 410, code: "offering_expired", detail: "has passed"},
		"block off the hour":         {path: "/v1/blocks", id: f.block(on.Add(30*time.Minute), 100_00), status: 400, code: "offering_invalid", detail: "not on the hour"},
		"block for free":             {path: "/v1/blocks", id: f.block(on, 0), status: 400, code: "offering_invalid", detail: "not positive"},
		"block paying the buyer":     {path: "/v1/blocks", id: f.block(on, -500_00), status: 400, code: "offering_invalid", detail: "not positive"},
		"plan starting in the past":  {path: "/v1/plans", id: f.plan([]time.Time{t0, on.Add(8 * time.Hour)}, []int64{100_00, 100_00}), status: 410, code: "offering_expired", detail: "has passed"},
		"plan off the hour":          {path: "/v1/plans", id: f.plan([]time.Time{on.Add(time.Minute)}, []int64{100_00}), status: 400, code: "offering_invalid", detail: "not on the hour"},
		"plan with a free segment":   {path: "/v1/plans", id: f.plan([]time.Time{on, on.Add(8 * time.Hour)}, []int64{100_00, 0}), status: 400, code: "offering_invalid", detail: "segment 2"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var p problem
			code := call(t, e.url, "POST", tc.path, map[string]any{"offeringId": tc.id, "clientToken": "forged " + name}, &p)
			if code != tc.status || p.Code != tc.code || !strings.Contains(p.Detail, tc.detail) {
				t.Fatalf("status %d, code %q (%s); want %d %s saying %q", code, p.Code, p.Detail, tc.status, tc.code, tc.detail)
			}
		})
	}
	if n := liveBlocks(t, e.db); n != 0 {
		t.Fatalf("%d blocks stored after forged quotes", n)
	}

	// Sound terms buy, forged or not; an extension of that block for
	// nothing does not.
	b, code := e.buy(f.block(on, 100_00), "sound")
	if code != 201 {
		t.Fatalf("a forged quote with sound terms: status %d", code)
	}
	var p problem
	if code := call(t, e.url, "POST", "/v1/blocks/"+b.ID+"/extensions", map[string]any{"offeringId": f.extension(b, 0)}, &p); code != 400 || p.Code != "offering_invalid" {
		t.Fatalf("a free extension: status %d, code %q (%s); want 400 offering_invalid", code, p.Code, p.Detail)
	}
	ledger, err := e.store.Ledger(context.Background(), e.team)
	if err != nil {
		t.Fatal(err)
	}
	if len(ledger) != 1 || ledger[0].Amount.Minor != 100_00 {
		t.Fatalf("ledger %+v: want the one sound charge", ledger)
	}
}

// TestNamesAndTagsPrintable: a block's name, a tag's key or value and a
// plan's name must be printable UTF-8. Control characters, bidirectional
// overrides and invalid UTF-8 are a 400 invalid_argument that names the
// field, and the refused purchase uses nothing up: the quote still buys.
func TestNamesAndTagsPrintable(t *testing.T) {
	e := start(t)
	s := t0.Add(2 * time.Hour)
	o := e.exact(searchQuery("h100.8x", 1, 4, s, s.Add(4*time.Hour)), 4, s)
	tests := map[string]struct {
		body   string // the JSON body's fields after offeringId and clientToken
		detail []string
	}{
		"right-to-left override in the name": {body: `"name": "invoice\u202egpj.exe"`, detail: []string{"name", "U+202E"}},
		"escape sequence in the name":        {body: `"name": "\u001b[2Jcleared"`, detail: []string{"name", "U+001B"}},
		"newline in the name":                {body: `"name": "a\nb"`, detail: []string{"name", "U+000A"}},
		"zero-width space in a tag key":      {body: `"tags": {"te\u200bam": "ml"}`, detail: []string{"tag key", "U+200B"}},
		"bell in a tag value":                {body: `"tags": {"team": "ml\u0007"}`, detail: []string{`tags["team"]`, "U+0007"}},
		"isolate in a tag value":             {body: `"tags": {"team": "\u2067ml"}`, detail: []string{`tags["team"]`, "U+2067"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			body := `{"offeringId": "` + o.OfferingID + `", "clientToken": "t-` + strings.ReplaceAll(name, " ", "-") + `", ` + tc.body + `}`
			code, p := postRaw(t, e.url, "/v1/blocks", body)
			if code != 400 || p.Code != "invalid_argument" {
				t.Fatalf("status %d, code %q (%s); want 400 invalid_argument", code, p.Code, p.Detail)
			}
			for _, want := range tc.detail {
				if !strings.Contains(p.Detail, want) {
					t.Errorf("detail %q does not say %q", p.Detail, want)
				}
			}
		})
	}
	plans := e.planOfferings(planQuery("h100.8x", 1, 4, 1, s.Add(8*time.Hour), s.Add(24*time.Hour)))
	if len(plans) == 0 {
		t.Fatal("no plan offering")
	}
	code, p := postRaw(t, e.url, "/v1/plans", `{"offeringId": "`+plans[0].OfferingID+`", "clientToken": "plan", "name": "llama\u0000"}`)
	if code != 400 || p.Code != "invalid_argument" || !strings.Contains(p.Detail, "name") {
		t.Fatalf("plan named with a NUL: status %d, code %q (%s); want 400 invalid_argument naming the name", code, p.Code, p.Detail)
	}
	if n := liveBlocks(t, e.db); n != 0 {
		t.Fatalf("%d blocks stored after refused names", n)
	}
	// Invalid UTF-8 is refused as such, before the JSON decoder could read
	// a bad byte as U+FFFD and store the name changed. (The service
	// refuses invalid UTF-8 from any front; core's tests check that.)
	code, p = postRaw(t, e.url, "/v1/blocks", "{\"offeringId\": \""+o.OfferingID+"\", \"clientToken\": \"utf8\", \"name\": \"a\xffb\"}")
	if code != 400 || p.Code != "invalid_argument" || !strings.Contains(p.Detail, "not valid UTF-8: byte 0xff") {
		t.Fatalf("a name with a 0xff byte: status %d, code %q (%s); want 400 invalid_argument saying the body is not valid UTF-8", code, p.Code, p.Detail)
	}
	if n := liveBlocks(t, e.db); n != 0 {
		t.Fatalf("%d blocks stored after a body that is not UTF-8", n)
	}
	// Printable text of any script, emoji with joiners included, buys.
	code, p = postRaw(t, e.url, "/v1/blocks", `{"offeringId": "`+o.OfferingID+`", "clientToken": "fine",
		"name": "entraînement 训练 👩‍💻", "tags": {"équipe": "ml"}}`)
	if code != 201 {
		t.Fatalf("a printable name: status %d, code %q (%s)", code, p.Code, p.Detail)
	}
}

// postRaw posts body, as it is (invalid UTF-8 included), with the
// server's admin token, and returns the status and the problem, if any.
func postRaw(t *testing.T, base, path, body string) (int, problem) {
	t.Helper()
	req, err := http.NewRequest("POST", base+path, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if tok, ok := tokens.Load(base); ok {
		req.Header.Set("Authorization", "Bearer "+tok.(string))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var p problem
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(data, &p); err != nil {
			t.Fatalf("POST %s: decoding %q: %v", path, data, err)
		}
	}
	return resp.StatusCode, p
}
