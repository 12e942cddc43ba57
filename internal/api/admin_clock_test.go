package api

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"capblock/internal/clock"
	"capblock/internal/contract"
)

// simService serves a real simulated clock, with its bounds.
type simService struct {
	*fakeService
	sim *clock.Sim
}

func (s simService) SimClock() contract.SimClock { return s.sim }

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
