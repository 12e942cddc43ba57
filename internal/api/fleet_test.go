package api

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/core"
)

func TestFleetRoutes(t *testing.T) {
	tests := map[string]struct {
		target string
		want   string
	}{
		"instance types with zones from the fleet": {
			target: "/v1/instance-types",
			want: `{"instanceTypes": [
				{"name": "h100.8x", "gpuModel": "H100", "gpusPerInstance": 8,
				 "onDemandPrice": {"amount": "98.50", "currency": "USD"}, "zones": ["zone-a", "zone-b"],
				 "awsNames": ["p5.48xlarge", "ml.p5.48xlarge"]},
				{"name": "l4.1x", "gpuModel": "L4", "gpusPerInstance": 1,
				 "onDemandPrice": {"amount": "0.70", "currency": "USD"}, "zones": ["zone-a"]},
				{"name": "a100.8x", "gpuModel": "A100", "gpusPerInstance": 8,
				 "onDemandPrice": {"amount": "4000.00", "currency": "USD"}, "zones": []}]}`,
		},
		"nodes with health and labels": {
			target: "/v1/nodes",
			want: `{"nodes": [
				{"name": "n1", "zone": "zone-b", "rack": "r1", "gpuModel": "H100", "gpus": 8, "health": "healthy", "labels": {"ib": "yes"}},
				{"name": "n2", "zone": "zone-a", "rack": "r2", "gpuModel": "H100", "gpus": 8, "health": "unhealthy", "labels": {}},
				{"name": "n3", "zone": "zone-a", "rack": "r3", "gpuModel": "L4", "gpus": 4, "health": "healthy", "labels": {}}]}`,
		},
		"availability per hour": {
			target: "/v1/availability?instanceType=h100.8x&zone=zone-a&from=2026-05-02T00:00:00Z&to=2026-05-02T02:00:00Z",
			want: `{"slots": [{"start": "2026-05-02T00:00:00Z", "free": 12},
				{"start": "2026-05-02T01:00:00Z", "free": 3}]}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fake := newFake()
			fake.slots = []core.Slot{
				{Start: time.Date(2026, 5, 2, 0, 0, 0, 0, time.UTC), Free: 12},
				{Start: time.Date(2026, 5, 2, 2, 0, 0, 0, time.FixedZone("CEST", 2*3600)).Add(time.Hour), Free: 3},
			}
			a := newTestAPI(t, fake, Options{})
			checkJSON(t, a.do(t, http.MethodGet, tc.target, ""), http.StatusOK, tc.want)
		})
	}
}

func TestAvailabilityParameters(t *testing.T) {
	fake := newFake()
	a := newTestAPI(t, fake, Options{})
	r := a.do(t, http.MethodGet, "/v1/availability?instanceType=l4.1x&from=2026-05-02T02:00:00%2B02:00&to=2026-05-03T00:00:00Z", "")
	checkJSON(t, r, http.StatusOK, `{"slots": []}`)
	want := []any{"l4.1x", "", time.Date(2026, 5, 2, 0, 0, 0, 0, time.UTC), time.Date(2026, 5, 3, 0, 0, 0, 0, time.UTC)}
	if diff := cmp.Diff(want, fake.gotAvail); diff != "" {
		t.Errorf("service got (-want +got):\n%s", diff)
	}
}

func TestAvailabilityInvalid(t *testing.T) {
	tests := map[string]struct {
		query string
		want  wantProblem
	}{
		"missing type": {
			query: "from=2026-05-02T00:00:00Z&to=2026-05-03T00:00:00Z",
			want:  wantProblem{http.StatusBadRequest, CodeInvalidArgument, "query.instanceType"},
		},
		"missing from": {
			query: "instanceType=h100.8x&to=2026-05-03T00:00:00Z",
			want:  wantProblem{http.StatusBadRequest, CodeInvalidArgument, "query.from"},
		},
		"bad time": {
			query: "instanceType=h100.8x&from=tomorrow&to=2026-05-03T00:00:00Z",
			want:  wantProblem{http.StatusBadRequest, CodeInvalidArgument, "query.from: expected string to be RFC 3339 date-time"},
		},
		"date without time": {
			query: "instanceType=h100.8x&from=2026-05-02&to=2026-05-03T00:00:00Z",
			want:  wantProblem{http.StatusBadRequest, CodeInvalidArgument, "query.from"},
		},
		"to before from": {
			query: "instanceType=h100.8x&from=2026-05-03T00:00:00Z&to=2026-05-02T00:00:00Z",
			want:  wantProblem{http.StatusBadRequest, CodeInvalidArgument, "query.to: to must be after from"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := newTestAPI(t, newFake(), Options{})
			checkProblem(t, a.do(t, http.MethodGet, "/v1/availability?"+tc.query, ""), tc.want)
		})
	}
}
