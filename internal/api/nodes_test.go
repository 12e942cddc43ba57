package api

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
)

func (f *fakeService) Nodes(context.Context) ([]contract.NodeView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]contract.NodeView, len(f.fleet.Nodes))
	for i, n := range f.fleet.Nodes {
		out[i] = contract.NodeView{Node: n, Record: f.health[n.Name]}
	}
	return out, nil
}

// FailNode records an admin's fail at t0 and reports it.
func (f *fakeService) FailNode(_ context.Context, name, reason string) (contract.NodeReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gotReason = reason
	if err := f.fail(); err != nil {
		return contract.NodeReport{}, err
	}
	rec := core.NodeHealth{Node: name, Health: core.Unhealthy, Reason: reason, Since: t0, Source: core.HealthFromAdmin}
	return contract.NodeReport{Node: name, Health: rec.Health, Record: rec, Replaced: []string{"cb-1"}}, nil
}

// RecoverNode reports a node never recorded: healthy, with no record.
func (f *fakeService) RecoverNode(_ context.Context, name string) (contract.NodeReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return contract.NodeReport{Node: name, Health: core.Healthy, Record: core.NodeHealth{Node: name, Health: core.Healthy}}, f.fail()
}

// TestNodesShowHealthRecords: GET /v1/nodes carries each node's
// recorded health, its reason, since when and who said so; a node never
// recorded has none of these.
func TestNodesShowHealthRecords(t *testing.T) {
	fake := newFake()
	fake.health = map[string]core.NodeHealth{
		"n1": {Node: "n1", Health: core.Healthy, Since: t0.Add(time.Hour), Source: core.HealthFromAdmin},
		"n2": {Node: "n2", Health: core.Unhealthy, Reason: "GPU 3: XID 79", Since: t0.In(time.FixedZone("CEST", 2*3600)), Source: core.HealthFromEngine},
	}
	a := newTestAPI(t, fake, Options{})
	checkJSON(t, a.do(t, http.MethodGet, "/v1/nodes", ""), http.StatusOK, `{"nodes": [
		{"name": "n1", "zone": "zone-b", "rack": "r1", "gpuModel": "H100", "gpus": 8, "health": "healthy", "labels": {"ib": "yes"},
		 "healthSince": "2026-05-01T11:00:00Z", "healthSource": "admin"},
		{"name": "n2", "zone": "zone-a", "rack": "r2", "gpuModel": "H100", "gpus": 8, "health": "unhealthy", "labels": {},
		 "healthReason": "GPU 3: XID 79", "healthSince": "2026-05-01T10:00:00Z", "healthSource": "engine"},
		{"name": "n3", "zone": "zone-a", "rack": "r3", "gpuModel": "L4", "gpus": 4, "health": "healthy", "labels": {}}]}`)
}

func TestFailNodeReason(t *testing.T) {
	tests := map[string]struct {
		body       string
		wantReason string
		want       string
	}{
		"no body": {
			want: `{"node": "n1", "health": "unhealthy", "healthSince": "2026-05-01T10:00:00Z", "healthSource": "admin",
				"replaced": ["cb-1"], "degraded": [], "recovered": []}`,
		},
		"a reason": {
			body:       `{"reason": "drained by ops"}`,
			wantReason: "drained by ops",
			want: `{"node": "n1", "health": "unhealthy", "healthReason": "drained by ops", "healthSince": "2026-05-01T10:00:00Z",
				"healthSource": "admin", "replaced": ["cb-1"], "degraded": [], "recovered": []}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fake := newFake()
			a := newTestAPI(t, fake, Options{})
			checkJSON(t, a.do(t, http.MethodPost, "/v1/admin/nodes/n1/fail", tc.body), http.StatusOK, tc.want)
			if fake.gotReason != tc.wantReason {
				t.Errorf("reason passed = %q, want %q", fake.gotReason, tc.wantReason)
			}
		})
	}
}

func TestFailNodeInvalid(t *testing.T) {
	tests := map[string]struct {
		body string
		want wantProblem
	}{
		"reason too long": {
			body: `{"reason": "` + strings.Repeat("x", 501) + `"}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body.reason"},
		},
		"unknown key": {
			body: `{"why": "x"}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "why"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := newTestAPI(t, newFake(), Options{})
			checkProblem(t, a.do(t, http.MethodPost, "/v1/admin/nodes/n1/fail", tc.body), tc.want)
		})
	}
}

// TestRecoverNodeNeverRecorded: a node that was never recorded reports
// no record fields.
func TestRecoverNodeNeverRecorded(t *testing.T) {
	a := newTestAPI(t, newFake(), Options{})
	checkJSON(t, a.do(t, http.MethodPost, "/v1/admin/nodes/n3/recover", ""), http.StatusOK,
		`{"node": "n3", "health": "healthy", "replaced": [], "degraded": [], "recovered": []}`)
}
