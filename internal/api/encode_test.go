package api

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"
)

// year10000 cannot be written as RFC 3339, so a body holding it cannot be
// encoded.
var year10000 = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)

// TestUnencodableResponseIsInternalProblem answers with bodies that
// encoding/json refuses: each must be a 500 problem, never a 200 with
// what huma writes after a failed marshal, and the cause must be logged.
func TestUnencodableResponseIsInternalProblem(t *testing.T) {
	tests := map[string]struct {
		target string
		setup  func(*fakeService)
	}{
		"clock": {
			target: "/v1/admin/clock",
			setup:  func(f *fakeService) { f.clock = &fakeClock{now: year10000} },
		},
		"block": {
			target: "/v1/blocks/cb-1",
			setup: func(f *fakeService) {
				b := testBlock()
				b.Team, b.End = "default", year10000
				f.blocks[b.ID] = b
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fake := newFake()
			tc.setup(fake)
			a := newTestAPI(t, fake, Options{})
			r := a.do(t, http.MethodGet, tc.target, "")
			checkProblem(t, r, wantProblem{http.StatusInternalServerError, CodeInternal, internalDetail})
			if bytes.Contains(r.body, []byte("error marshaling")) {
				t.Errorf("huma's marshal error leaks into the body: %s", r.body)
			}
			if !strings.Contains(a.logs.String(), `"status":500`) || !strings.Contains(a.logs.String(), "encoding the 200 response of ") {
				t.Errorf("the log does not tell the cause: %s", a.logs)
			}
		})
	}
}

// TestResponsesAreEncodedAsBefore checks the body of an ordinary answer:
// compact JSON, no HTML escaping, one newline at the end.
func TestResponsesAreEncodedAsBefore(t *testing.T) {
	fake := newFake()
	b := testBlock()
	b.Team, b.Name = "default", "<a&b>"
	fake.blocks[b.ID] = b
	a := newTestAPI(t, fake, Options{})
	r := a.do(t, http.MethodGet, "/v1/blocks/cb-1", "")
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, Content-Type %q: %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	if !bytes.HasPrefix(r.body, []byte(`{"id":"cb-1","name":"<a&b>",`)) || !bytes.HasSuffix(r.body, []byte("}\n")) {
		t.Errorf("body %q", r.body)
	}
}
