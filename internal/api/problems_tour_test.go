package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"capblock/internal/backend/local"
	"capblock/internal/clock"
	"capblock/internal/fleet"
	"capblock/internal/service"
	"capblock/internal/store/sqlite"
)

const tourFleet = `
currency: USD
instanceTypes:
  - {name: l4.1x, gpuModel: L4, gpusPerInstance: 1, onDemandPrice: "1.00"}
zones:
  - name: zone-a
    racks:
      - name: r1
        nodeGroups:
          - {prefix: l4-, count: 1, gpuModel: L4, gpus: 4}
`

// tourServer is the real service on a fresh SQLite file with a simulated
// clock, behind the API on a loopback HTTP server whose problems are
// recorded (problems_record_test.go).
type tourServer struct {
	url   string
	admin string // the first administrator's token
	doc   *document
}

func newTourServer(t *testing.T, opts Options) *tourServer {
	t.Helper()
	ctx := context.Background()
	f, err := fleet.Parse([]byte(tourFleet))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "capblock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	log := slog.New(slog.DiscardHandler)
	svc, err := service.New(ctx, service.Config{Fleet: f, Store: st, Backend: local.NewSim(log, f.Nodes),
		Clock: clock.NewSim(time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	tokenPath := filepath.Join(dir, "admin.token")
	if _, err := svc.Bootstrap(ctx, tokenPath); err != nil {
		t.Fatal(err)
	}
	token, err := os.ReadFile(tokenPath)
	if err != nil {
		t.Fatal(err)
	}
	opts.Logger = log
	front := svc.Guarded()
	srv := httptest.NewServer(recordProblems(front, New(front, opts)))
	t.Cleanup(srv.Close)
	return &tourServer{url: srv.URL, admin: strings.TrimSpace(string(token)), doc: servedDocument(front.Simulated())}
}

// tourAnswer is what a request got back.
type tourAnswer struct {
	status int
	ctype  string
	body   []byte
}

func (a tourAnswer) code() string {
	var p Problem
	_ = json.Unmarshal(a.body, &p)
	return p.Code
}

func (s *tourServer) send(t *testing.T, token, method, path, ctype string, body []byte) tourAnswer {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := tourAnswer{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), body: b}
	if a.status >= 400 && (a.ctype != problemJSON || a.code() == "") {
		t.Errorf("%s %s answered %d without a problem: %s %s", method, path, a.status, a.ctype, b)
	}
	return a
}

// json sends v as JSON and decodes the answer into out, if any.
func (s *tourServer) json(t *testing.T, token, method, path string, v any) tourAnswer {
	t.Helper()
	var body []byte
	if v != nil {
		var err error
		if body, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	return s.send(t, token, method, path, "application/json", body)
}

// target is op's path with every path parameter an unknown id.
func (op docOperation) target() string {
	segs := make([]string, len(op.segments))
	for i, seg := range op.segments {
		if strings.HasPrefix(seg, "{") {
			seg = "nope-0"
		}
		segs[i] = seg
	}
	return "/" + strings.Join(segs, "/")
}

// TestProblemTour provokes, on every operation of the real service, the
// problems that every operation of its kind answers: no token, a token
// too weak, unknown ids, a malformed body, a body too large or not JSON,
// too many requests; and the domain problems of buying, cancelling and
// naming. Every answer is recorded, and the run fails on one that the
// document does not declare for its operation (TestMain).
func TestProblemTour(t *testing.T) {
	s := newTourServer(t, Options{MaxBodyBytes: 4 << 10})

	// A team with a member and a viewer.
	var team struct{ ID string }
	if a := s.json(t, s.admin, http.MethodPost, "/v1/teams", map[string]any{"name": "tour"}); a.status != http.StatusCreated {
		t.Fatalf("creating a team: %d %s", a.status, a.body)
	} else {
		_ = json.Unmarshal(a.body, &team)
	}
	tokenOf := func(name, role string) string {
		t.Helper()
		var user struct{ ID string }
		a := s.json(t, s.admin, http.MethodPost, "/v1/users", map[string]any{"name": name, "team": team.ID, "role": role})
		if a.status != http.StatusCreated {
			t.Fatalf("creating %s: %d %s", name, a.status, a.body)
		}
		_ = json.Unmarshal(a.body, &user)
		var tok struct{ Token string }
		a = s.json(t, s.admin, http.MethodPost, "/v1/users/"+user.ID+"/tokens", map[string]any{})
		if a.status != http.StatusCreated {
			t.Fatalf("a token for %s: %d %s", name, a.status, a.body)
		}
		_ = json.Unmarshal(a.body, &tok)
		return tok.Token
	}
	member := tokenOf("ada", "member")
	viewer := tokenOf("vic", "viewer")

	for _, op := range s.doc.ops {
		t.Run(op.id, func(t *testing.T) {
			path := op.target()
			_, reads := op.problems[http.StatusUnsupportedMediaType]
			var body []byte
			ctype := ""
			if reads {
				body, ctype = []byte("{}"), "application/json"
			}
			if useCases[op.id] != public {
				for name, token := range map[string]string{"no token": "", "an unknown token": "cbt_nope"} {
					if a := s.send(t, token, op.method, path, ctype, body); a.status != http.StatusUnauthorized || a.code() != CodeUnauthenticated {
						t.Errorf("with %s: %d %s, want 401 unauthenticated", name, a.status, a.code())
					}
				}
			}
			for _, token := range []string{viewer, member, s.admin} {
				s.send(t, token, op.method, path, ctype, body)
			}
			if !reads {
				return
			}
			if a := s.send(t, s.admin, op.method, path, "application/json", []byte(`{"notAField": 1}`)); a.status < 400 {
				t.Errorf("an unknown body field: %d, want a problem", a.status)
			}
			s.send(t, s.admin, op.method, path, "application/json", []byte(`{"truncated`))
			s.send(t, s.admin, op.method, path, "text/plain", []byte("hello"))
			big := append(append([]byte(`{"x": "`), bytes.Repeat([]byte("x"), 8<<10)...), '"', '}')
			s.send(t, s.admin, op.method, path, "application/json", big)
		})
	}

	t.Run("buying", func(t *testing.T) {
		var offers struct {
			Offerings []struct{ OfferingID string }
		}
		a := s.json(t, member, http.MethodGet, "/v1/offerings?instanceType=l4.1x&instanceCount=1&durationHours=2&startAfter=2027-03-02T00:00:00Z&endBefore=2027-03-03T00:00:00Z", nil)
		if err := json.Unmarshal(a.body, &offers); err != nil || len(offers.Offerings) == 0 {
			t.Fatalf("no offering: %d %s", a.status, a.body)
		}
		id := offers.Offerings[0].OfferingID
		buy := func(token, offering, clientToken, name string) tourAnswer {
			return s.json(t, token, http.MethodPost, "/v1/blocks", map[string]any{"offeringId": offering, "clientToken": clientToken, "name": name})
		}
		var block struct{ ID string }
		a = buy(member, id, "t-1", "first")
		if a.status != http.StatusCreated {
			t.Fatalf("buying: %d %s", a.status, a.body)
		}
		_ = json.Unmarshal(a.body, &block)
		want := func(a tourAnswer, status int, code string) {
			t.Helper()
			if a.status != status || a.code() != code {
				t.Errorf("got %d %s, want %d %s: %s", a.status, a.code(), status, code, a.body)
			}
		}
		want(buy(member, id, "t-1", "other name"), http.StatusConflict, CodeIdempotencyMismatch)
		want(buy(member, "cbo-forged.sig", "t-2", ""), http.StatusBadRequest, CodeOfferingInvalid)
		want(buy(viewer, id, "t-3", ""), http.StatusForbidden, CodeForbidden)
		want(s.json(t, member, http.MethodPost, "/v1/blocks/"+block.ID+"/extensions", map[string]any{"offeringId": id}), http.StatusBadRequest, CodeOfferingInvalid)
		want(s.json(t, member, http.MethodPost, "/v1/blocks/"+block.ID+"/cancel", nil), http.StatusOK, "")
		want(s.json(t, member, http.MethodPost, "/v1/blocks/"+block.ID+"/cancel", nil), http.StatusConflict, CodeInvalidState)
		s.json(t, member, http.MethodPost, "/v1/blocks/"+block.ID+"/release", nil)
		s.json(t, member, http.MethodPost, "/v1/blocks/"+block.ID+"/lending", map[string]any{"lending": true})
		s.json(t, member, http.MethodGet, "/v1/blocks/"+block.ID+"/extension-offerings?durationHours=1", nil)
		s.json(t, member, http.MethodGet, "/v1/blocks/"+block.ID+"/cancel-quote", nil)
	})

	// The fleet has 4 L4 GPUs: a quote for one bought under 4 more
	// tokens runs out; a quota, a budget and the clock refuse more.
	t.Run("limits", func(t *testing.T) {
		search := func() string {
			t.Helper()
			var offers struct {
				Offerings []struct{ OfferingID string }
			}
			a := s.json(t, member, http.MethodGet, "/v1/offerings?instanceType=l4.1x&instanceCount=1&durationHours=3&startAfter=2027-03-05T00:00:00Z&endBefore=2027-03-06T00:00:00Z", nil)
			if err := json.Unmarshal(a.body, &offers); err != nil || len(offers.Offerings) == 0 {
				t.Fatalf("no offering: %d %s", a.status, a.body)
			}
			return offers.Offerings[0].OfferingID
		}
		buy := func(offering, clientToken string) tourAnswer {
			return s.json(t, member, http.MethodPost, "/v1/blocks", map[string]any{"offeringId": offering, "clientToken": clientToken})
		}
		id := search()
		last := tourAnswer{}
		for i := range 6 {
			if last = buy(id, "cap-"+string(rune('a'+i))); last.status >= 400 {
				break
			}
		}
		if last.status != http.StatusConflict {
			t.Errorf("buying a quote until the fleet is full: %d %s, want 409", last.status, last.code())
		}
		s.json(t, member, http.MethodGet, "/v1/blocks/nope-0/extension-offerings?durationHours=1", nil)

		// A tight quota, then a tight budget, for the member's team.
		s.json(t, s.admin, http.MethodPut, "/v1/teams/"+team.ID+"/quotas", map[string]any{"maxInstancesPerBlock": 1, "maxInstancesHeld": 1, "maxDurationHours": 1, "maxLeadDays": 1})
		s.json(t, member, http.MethodPost, "/v1/plans", map[string]any{"offeringId": "tpo-forged.sig", "clientToken": "p-1"})
		s.json(t, member, http.MethodPost, "/v1/series", map[string]any{"offeringId": "tso-forged.sig", "clientToken": "s-1"})
		s.json(t, member, http.MethodPost, "/v1/orders", map[string]any{"instanceType": "l4.1x", "instanceCount": 1, "durationHours": 2,
			"startAfter": "2027-03-05T00:00:00Z", "endBefore": "2027-03-06T00:00:00Z", "clientToken": "o-1", "maxFee": map[string]any{"amount": "1.00", "currency": "USD"}})
		s.json(t, s.admin, http.MethodPut, "/v1/teams/"+team.ID+"/budget", map[string]any{"amount": map[string]any{"amount": "0.01", "currency": "USD"}, "period": "total"})
		s.json(t, s.admin, http.MethodPut, "/v1/teams/"+team.ID+"/quotas", map[string]any{"maxInstancesPerBlock": 0, "maxInstancesHeld": 0, "maxDurationHours": 0, "maxLeadDays": 0})
		id = search()
		s.json(t, member, http.MethodPost, "/v1/blocks", map[string]any{"offeringId": id, "clientToken": "budget-1"})

		// Past its expiry, a quote is refused.
		s.json(t, s.admin, http.MethodPost, "/v1/admin/clock", map[string]any{"advance": "2h"})
		if a := buy(id, "late-1"); a.status < 400 {
			t.Errorf("buying an expired quote: %d", a.status)
		}
		s.json(t, member, http.MethodPost, "/v1/jobs", map[string]any{"blockId": "cb-nope", "command": []string{"true"}})
		s.json(t, member, http.MethodPost, "/v1/webhooks", map[string]any{"url": "http://127.0.0.1:1/hook"})
	})

	t.Run("naming", func(t *testing.T) {
		if a := s.json(t, s.admin, http.MethodPost, "/v1/teams", map[string]any{"name": "tour"}); a.status != http.StatusConflict || a.code() != CodeConflict {
			t.Errorf("a team's name twice: %d %s, want 409 conflict", a.status, a.code())
		}
		s.json(t, s.admin, http.MethodPost, "/v1/users", map[string]any{"name": "ada", "team": team.ID, "role": "member"})
		s.json(t, s.admin, http.MethodPost, "/v1/users", map[string]any{"name": "bob", "team": "team-nope", "role": "member"})
	})

	// A limit of one request: every operation's second is refused, and so
	// is a second request without a valid token from the same address.
	t.Run("rate limit", func(t *testing.T) {
		limited := newTourServer(t, Options{RateLimit: 0.001, RateBurst: 1})
		for _, token := range []string{limited.admin, ""} {
			limited.send(t, token, http.MethodGet, "/v1/whoami", "", nil)
			for _, op := range limited.doc.ops {
				if useCases[op.id] == public {
					continue
				}
				if a := limited.send(t, token, op.method, op.target(), "", nil); a.status != http.StatusTooManyRequests {
					t.Errorf("%s %s: %d %s, want 429", op.method, op.target(), a.status, a.code())
				}
			}
		}
	})

	if testing.Verbose() {
		var ops []string
		for _, op := range s.doc.ops {
			ops = append(ops, op.id)
		}
		slices.Sort(ops)
		t.Logf("toured %d operations", len(ops))
	}
}
