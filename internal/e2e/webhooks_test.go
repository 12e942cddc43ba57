package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/core"
	"capblock/internal/service"
)

// hookReceiver is a webhook endpoint: it checks each delivery's signature
// with the webhook's secret, refuses the first delivery with a 500 and
// accepts the others.
type hookReceiver struct {
	*httptest.Server

	mu       sync.Mutex
	secret   string
	requests []hookRequest
}

type hookRequest struct {
	eventType, contentType string
	body                   []byte
	signature              error
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		sig := core.VerifySignature([]byte(r.secret), req.Header.Get("Capblock-Signature"), body, time.Now(), 5*time.Minute)
		r.requests = append(r.requests, hookRequest{eventType: req.Header.Get("Capblock-Event"),
			contentType: req.Header.Get("Content-Type"), body: body, signature: sig})
		first := len(r.requests) == 1
		r.mu.Unlock()
		if first {
			http.Error(w, "not yet", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *hookReceiver) got() []hookRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hookRequest(nil), r.requests...)
}

type webhook struct {
	ID     string   `json:"id"`
	Team   string   `json:"team"`
	URL    string   `json:"url"`
	Events []string `json:"events"`
	Secret string   `json:"secret"`
}

type hookDelivery struct {
	EventID       string     `json:"eventId"`
	Attempt       int        `json:"attempt"`
	StatusCode    int        `json:"statusCode"`
	Error         string     `json:"error"`
	NextAttemptAt *time.Time `json:"nextAttemptAt"`
	Done          bool       `json:"done"`
}

// runWebhooks runs the delivery worker, with short waits between
// attempts, until the test ends.
func (e *env) runWebhooks() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.svc.RunWebhooksWith(ctx, service.WebhookOptions{FirstRetry: 20 * time.Millisecond, MaxRetry: 100 * time.Millisecond, Poll: 50 * time.Millisecond})
	}()
	e.t.Cleanup(func() { cancel(); <-done })
}

// TestWebhooks subscribes a receiver to block.*, buys a block and lets it
// become active: the receiver gets block.purchased (after one retry),
// block.scheduled and block.active, in order, each signed with the
// webhook's secret and shaped as GET /v1/events shows it, and the
// delivery log records the retry.
func TestWebhooks(t *testing.T) {
	e := start(t)
	r := newHookReceiver(t)

	// 1. Subscribe; the secret is shown this once.
	var wh webhook
	if code := call(t, e.url, "POST", "/v1/webhooks", map[string]any{"url": r.URL, "events": []string{"block.*"}}, &wh); code != 201 {
		t.Fatalf("creating a webhook: status %d", code)
	}
	if wh.Secret == "" || wh.Team != e.team || wh.URL != r.URL {
		t.Fatalf("created webhook %+v", wh)
	}
	r.mu.Lock()
	r.secret = wh.Secret
	r.mu.Unlock()
	var list struct{ Webhooks []webhook }
	if code := call(t, e.url, "GET", "/v1/webhooks", nil, &list); code != 200 || len(list.Webhooks) != 1 || list.Webhooks[0].Secret != "" {
		t.Fatalf("listing webhooks: status %d, %+v (the secret must not be listed)", code, list.Webhooks)
	}
	e.runWebhooks()

	// 2. Buy a block and let it start.
	start := t0.Add(2 * time.Hour)
	o := e.exact(searchQuery("h100.8x", 1, 4, start, start.Add(24*time.Hour)), 4, start)
	b, code := e.buy(o.OfferingID, "hook-1")
	if code != 201 {
		t.Fatalf("buy: status %d", code)
	}
	e.advance(2 * time.Hour)

	// 3. The delivery log ends each delivery, the first after a retry.
	var log struct{ Deliveries []hookDelivery }
	var summary []string
	want := []string{"0", "1 500 retry", "2 200 done", "0", "1 200 done", "0", "1 200 done"}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !cmp.Equal(want, summary); time.Sleep(10 * time.Millisecond) {
		if code := call(t, e.url, "GET", "/v1/webhooks/"+wh.ID+"/deliveries", nil, &log); code != 200 {
			t.Fatalf("deliveries: status %d", code)
		}
		summary = summarize(log.Deliveries)
	}
	if diff := cmp.Diff(want, summary); diff != "" {
		t.Fatalf("delivery log (-want +got):\n%s\n%+v", diff, log.Deliveries)
	}
	if retry := log.Deliveries[1]; retry.Error != "answered 500 Internal Server Error" {
		t.Errorf("the failed attempt's error: %q", retry.Error)
	}

	// 4. What the receiver got: the events of the block, in order, signed,
	// the same as the event feed has them.
	feed := map[string]map[string]any{}
	var events struct{ Events []map[string]any }
	call(t, e.url, "GET", "/v1/events", nil, &events)
	for _, ev := range events.Events {
		feed[ev["id"].(string)] = ev
	}
	var types []string
	for i, req := range r.got() {
		types = append(types, req.eventType)
		if req.signature != nil {
			t.Errorf("delivery %d: %v", i, req.signature)
		}
		if req.contentType != "application/json" {
			t.Errorf("delivery %d: Content-Type %q", i, req.contentType)
		}
		var got map[string]any
		if err := json.Unmarshal(req.body, &got); err != nil {
			t.Fatalf("delivery %d is not JSON: %v\n%s", i, err, req.body)
		}
		if got["subject"] != b.ID || got["type"] != req.eventType {
			t.Errorf("delivery %d: %s of %v, header %s", i, got["type"], got["subject"], req.eventType)
		}
		if diff := cmp.Diff(feed[got["id"].(string)], got); diff != "" {
			t.Errorf("delivery %d differs from GET /v1/events (-feed +delivered):\n%s", i, diff)
		}
	}
	if diff := cmp.Diff([]string{"block.purchased", "block.purchased", "block.scheduled", "block.active"}, types); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}

	// 5. Deleting the webhook deletes its log.
	if code := call(t, e.url, "DELETE", "/v1/webhooks/"+wh.ID, nil, nil); code != 200 {
		t.Fatalf("deleting the webhook: status %d", code)
	}
	var p problem
	if code := call(t, e.url, "GET", "/v1/webhooks/"+wh.ID+"/deliveries", nil, &p); code != 404 || p.Code != "not_found" {
		t.Errorf("deliveries of a deleted webhook: %d %s", code, p.Code)
	}
}

// summarize writes a delivery log as "attempt [status] [retry|done]".
func summarize(ds []hookDelivery) []string {
	var out []string
	for _, d := range ds {
		s := strconv.Itoa(d.Attempt)
		if d.StatusCode != 0 {
			s += " " + strconv.Itoa(d.StatusCode)
		}
		switch {
		case d.Done:
			s += " done"
		case d.Attempt > 0 && d.NextAttemptAt != nil:
			s += " retry"
		}
		out = append(out, s)
	}
	return out
}

// webhook makes a webhook of a team, as the admin (authorization matrix).
func (f *authzFixture) webhook(team string) string {
	var out struct{ ID string }
	body := map[string]any{"url": "https://example.com/hook", "events": []string{"*"}, "team": team}
	if code := call(f.e.t, f.e.url, "POST", "/v1/webhooks", body, &out); code != 201 {
		f.e.t.Fatalf("creating a webhook for %s: %d", team, code)
	}
	return out.ID
}
