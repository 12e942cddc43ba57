package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"capblock/internal/core"
)

func TestServiceErrorMapping(t *testing.T) {
	tests := map[string]struct {
		err  error
		want wantProblem
	}{
		"invalid argument": {
			err:  core.Invalidf("unknown instance type %q", "x"),
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, `invalid argument: unknown instance type "x"`},
		},
		"not found": {
			err:  fmt.Errorf("block cb-7: %w", core.ErrNotFound),
			want: wantProblem{http.StatusNotFound, CodeNotFound, "block cb-7: not found"},
		},
		"conflict": {
			err:  fmt.Errorf("committing: %w", core.ErrConflict),
			want: wantProblem{http.StatusConflict, CodeConflict, "committing: conflict"},
		},
		"no capacity": {
			err:  fmt.Errorf("only 3 of 4 h100.8x free: %w", core.ErrNoCapacity),
			want: wantProblem{http.StatusConflict, CodeNoCapacity, "only 3 of 4 h100.8x free"},
		},
		"offering expired": {
			err:  fmt.Errorf("offering cbo-1: %w", core.ErrOfferingExpired),
			want: wantProblem{http.StatusGone, CodeOfferingExpired, "offering cbo-1: offering expired"},
		},
		"offering invalid": {
			err:  fmt.Errorf("offering x: %w", core.ErrOfferingInvalid),
			want: wantProblem{http.StatusBadRequest, CodeOfferingInvalid, "offering x: offering invalid"},
		},
		"idempotency mismatch": {
			err:  fmt.Errorf("token t: %w", core.ErrIdempotencyMismatch),
			want: wantProblem{http.StatusConflict, CodeIdempotencyMismatch, "token t"},
		},
		"invalid state": {
			err:  fmt.Errorf("block cb-1 is expired: %w", core.ErrInvalidState),
			want: wantProblem{http.StatusConflict, CodeInvalidState, "block cb-1 is expired"},
		},
		"most specific sentinel wins": {
			err:  fmt.Errorf("%w: %w", core.ErrInvalidArgument, core.ErrOfferingExpired),
			want: wantProblem{http.StatusGone, CodeOfferingExpired, "offering expired"},
		},
		"anything else is internal": {
			err:  errors.New("SQLITE_BUSY: database is locked at /var/lib/capblock.db"),
			want: wantProblem{http.StatusInternalServerError, CodeInternal, internalDetail},
		},
	}
	routes := []struct{ method, target, body string }{
		{http.MethodGet, "/v1/availability?instanceType=h100.8x&from=2026-05-02T00:00:00Z&to=2026-05-03T00:00:00Z", ""},
		{http.MethodGet, "/v1/offerings?instanceType=h100.8x&instanceCount=1&durationHours=4&startAfter=2026-05-02T00:00:00Z&endBefore=2026-05-03T00:00:00Z", ""},
		{http.MethodPost, "/v1/blocks", `{"offeringId": "cbo-abc.sig", "clientToken": "t"}`},
		{http.MethodGet, "/v1/blocks", ""},
		{http.MethodGet, "/v1/blocks/cb-1", ""},
		{http.MethodPost, "/v1/blocks/cb-1/cancel", ""},
		{http.MethodGet, "/v1/blocks/cb-1/extension-offerings?durationHours=1", ""},
		{http.MethodPost, "/v1/blocks/cb-1/extensions", `{"offeringId": "cbe-ext.sig"}`},
		{http.MethodGet, "/v1/blocks/cb-1/status", ""},
		{http.MethodGet, "/v1/events", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, route := range routes {
				fake := newFake()
				fake.err = tc.err
				a := newTestAPI(t, fake, Options{})
				a.handler = unrecorded(a.handler) // one error on every route
				r := a.do(t, route.method, route.target, route.body)
				checkProblem(t, r, tc.want)
				if tc.want.code == CodeInternal {
					if strings.Contains(string(r.body), "SQLITE") {
						t.Errorf("%s %s leaks the error: %s", route.method, route.target, r.body)
					}
					if !strings.Contains(a.logs.String(), "SQLITE_BUSY") || !strings.Contains(a.logs.String(), `"level":"ERROR"`) {
						t.Errorf("%s %s: the error is not logged: %s", route.method, route.target, a.logs)
					}
				}
			}
		})
	}
}

func TestRoutingErrorsAreProblems(t *testing.T) {
	tests := map[string]struct {
		method, target string
		want           wantProblem
		wantAllow      string
	}{
		"unknown route": {
			method: http.MethodGet, target: "/v1/nothing",
			want: wantProblem{http.StatusNotFound, CodeNotFound, "no route for GET /v1/nothing"},
		},
		"root": {
			method: http.MethodGet, target: "/",
			want: wantProblem{http.StatusNotFound, CodeNotFound, "no route"},
		},
		"wrong method": {
			method: http.MethodDelete, target: "/v1/blocks",
			want:      wantProblem{http.StatusMethodNotAllowed, CodeInvalidArgument, "method DELETE is not allowed on /v1/blocks"},
			wantAllow: "GET, HEAD, POST",
		},
		"wrong method on a block": {
			method: http.MethodPut, target: "/v1/blocks/cb-1",
			want:      wantProblem{http.StatusMethodNotAllowed, CodeInvalidArgument, "(allowed: GET, HEAD)"},
			wantAllow: "GET, HEAD",
		},
		"clock without a sim clock": {
			method: http.MethodGet, target: "/v1/admin/clock",
			want: wantProblem{http.StatusNotFound, CodeNotFound, "no route"},
		},
		"setting the clock without a sim clock": {
			method: http.MethodPost, target: "/v1/admin/clock",
			want: wantProblem{http.StatusNotFound, CodeNotFound, "no route"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := newTestAPI(t, newFake(), Options{})
			r := a.do(t, tc.method, tc.target, "")
			checkProblem(t, r, tc.want)
			if got := r.header.Get("Allow"); got != tc.wantAllow {
				t.Errorf("Allow = %q, want %q", got, tc.wantAllow)
			}
		})
	}
}

func TestPanicIsInternalProblem(t *testing.T) {
	fake := newFake()
	fake.panicMsg = "secret state"
	a := newTestAPI(t, fake, Options{})
	r := a.do(t, http.MethodGet, "/v1/blocks", "")
	checkProblem(t, r, wantProblem{http.StatusInternalServerError, CodeInternal, internalDetail})
	if strings.Contains(string(r.body), "secret") {
		t.Errorf("the panic leaks: %s", r.body)
	}
	if !strings.Contains(a.logs.String(), "panic: secret state") {
		t.Errorf("the panic is not logged: %s", a.logs)
	}
}
