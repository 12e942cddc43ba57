package api

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"capblock/internal/clock"
	"capblock/internal/contract"
)

// simService serves a real simulated clock, with its bounds.
type simService struct {
	*fakeService
	sim *clock.Sim
}

func (s simService) Simulated() bool { return true }
func (s simService) Now() time.Time  { return s.sim.Now() }
func (s simService) Clock(context.Context) (time.Time, error) {
	return clockOf(s.sim)
}
func (s simService) SetClock(_ context.Context, req contract.ClockRequest) (time.Time, error) {
	return setClockOf(s.sim, req)
}

// TestClockStaysInRange moves a real simulated clock past its bounds
// through the API: each move is a 400 that names the bound, and the clock
// stays where it was.
func TestClockStaysInRange(t *testing.T) {
	tests := map[string]struct {
		body string
		want string
	}{
		"set near year 9999": {body: `{"now": "9999-12-31T23:00:00Z"}`, want: "must stay before 2200-01-01T00:00:00Z"},
		"set to the limit":   {body: `{"now": "2200-01-01T00:00:00Z"}`, want: "must stay before 2200-01-01T00:00:00Z"},
		"advance past it":    {body: `{"advance": "2000000h"}`, want: "must stay before 2200-01-01T00:00:00Z"},
		"advance the most":   {body: `{"advance": "2562047h47m16.854775807s"}`, want: "must stay before 2200-01-01T00:00:00Z"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sim := clock.NewSim(t0)
			logs := &bytes.Buffer{}
			a := &testAPI{
				handler: New(simService{fakeService: newFake(), sim: sim}, Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)), Registry: prometheus.NewRegistry()}),
				logs:    logs,
			}
			checkProblem(t, a.do(t, http.MethodPost, "/v1/admin/clock", tc.body),
				wantProblem{http.StatusBadRequest, CodeInvalidArgument, tc.want})
			if !sim.Now().Equal(t0) {
				t.Errorf("the clock moved to %s", sim.Now())
			}
			checkJSON(t, a.do(t, http.MethodGet, "/v1/admin/clock", ""), http.StatusOK, `{"now": "2026-05-01T10:00:00Z"}`)

			// A move within the range still works.
			r := a.do(t, http.MethodPost, "/v1/admin/clock", `{"now": "2199-12-31T23:59:59Z"}`)
			checkJSON(t, r, http.StatusOK, `{"now": "2199-12-31T23:59:59Z"}`)
			var got clockJSON
			if err := json.Unmarshal(r.body, &got); err != nil || !got.Now.Equal(sim.Now()) {
				t.Errorf("answered %s (%v), the clock shows %s", r.body, err, sim.Now())
			}
		})
	}
}

// TestEveryAnswerTellsTheServiceTime: every response, public or not, a
// success or a problem, carries the service's clock in Capblock-Now: the
// simulated clock where there is one, as it moves, and the wall clock
// otherwise.
func TestEveryAnswerTellsTheServiceTime(t *testing.T) {
	sim := clock.NewSim(t0)
	simAPI := &testAPI{handler: New(simService{fakeService: newFake(), sim: sim}, Options{Logger: slog.New(slog.NewJSONHandler(&bytes.Buffer{}, nil)), Registry: prometheus.NewRegistry()})}
	requests := map[string]func() response{
		"public":         func() response { return simAPI.do(t, http.MethodGet, "/healthz", "") },
		"authenticated":  func() response { return simAPI.do(t, http.MethodGet, "/v1/blocks", "") },
		"no such route":  func() response { return simAPI.do(t, http.MethodGet, "/v1/nothing", "") },
		"no token":       func() response { return simAPI.doAs(t, "", http.MethodGet, "/v1/blocks", "") },
		"a bad argument": func() response { return simAPI.do(t, http.MethodGet, "/v1/offerings?instanceCount=x", "") },
	}
	for name, request := range requests {
		t.Run(name, func(t *testing.T) {
			if got := request().header.Get(NowHeader); got != "2026-05-01T10:00:00Z" {
				t.Errorf("%s: %q, want the simulated time 2026-05-01T10:00:00Z", NowHeader, got)
			}
		})
	}
	if _, err := sim.Advance(26 * time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := requests["public"]().header.Get(NowHeader); got != "2026-05-02T12:00:00Z" {
		t.Errorf("after the clock moved 26h: %s %q, want 2026-05-02T12:00:00Z", NowHeader, got)
	}

	wallAPI := newTestAPI(t, newFake(), Options{})
	before := time.Now()
	got, err := time.Parse(time.RFC3339Nano, wallAPI.do(t, http.MethodGet, "/healthz", "").header.Get(NowHeader))
	if err != nil || got.Before(before) || got.After(time.Now()) || got.Location() != time.UTC {
		t.Errorf("on the wall clock: %s %v (%v), want the time of the request in UTC", NowHeader, got, err)
	}
}
