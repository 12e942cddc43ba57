package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestJobRequestRefused: a job is refused when it is created, not when it
// would start: on a block that is cancelled or expired (409 invalid_state),
// and with a NUL byte in its command or environment or a control
// character in its name (400). Nothing is stored for a refused job.
func TestJobRequestRefused(t *testing.T) {
	e := start(t)
	s := t0.Add(2 * time.Hour)
	q := searchQuery("l4.1x", 1, 2, s, s.Add(2*time.Hour))
	cancelled, _ := e.buy(e.exact(q, 2, s).OfferingID, "to-cancel")
	if code := call(t, e.url, "POST", "/v1/blocks/"+cancelled.ID+"/cancel", nil, nil); code != 200 {
		t.Fatalf("cancelling: %d", code)
	}
	expired, _ := e.buy(e.exact(q, 2, s).OfferingID, "to-expire")
	e.advance(4 * time.Hour) // the second block ends
	s2 := t0.Add(6 * time.Hour)
	live, _ := e.buy(e.exact(searchQuery("l4.1x", 1, 2, s2, s2.Add(2*time.Hour)), 2, s2).OfferingID, "live-later")

	tests := map[string]struct {
		body       map[string]any
		wantStatus int
		wantCode   string
		wantDetail string
	}{
		"cancelled block": {map[string]any{"blockId": cancelled.ID, "command": []string{"true"}}, 409, "invalid_state", "is cancelled"},
		"expired block":   {map[string]any{"blockId": expired.ID, "command": []string{"true"}}, 409, "invalid_state", "is expired"},
		"NUL in an argument": {map[string]any{"blockId": live.ID, "command": []string{"echo", "a\x00b"}}, 400, "invalid_argument",
			"command[1] contains a NUL byte"},
		"NUL in an env value": {map[string]any{"blockId": live.ID, "command": []string{"true"}, "env": map[string]string{"A": "x\x00y"}}, 400,
			"invalid_argument", "environment variable A contains a NUL byte"},
		"NUL in an env name": {map[string]any{"blockId": live.ID, "command": []string{"true"}, "env": map[string]string{"A\x00B": "x"}}, 400,
			"invalid_argument", "environment variable name"},
		"escape in the name": {map[string]any{"blockId": live.ID, "name": "train\x1b[2J", "command": []string{"true"}}, 400,
			"invalid_argument", "name"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var p problem
			if code := call(t, e.url, "POST", "/v1/jobs", tc.body, &p); code != tc.wantStatus || p.Code != tc.wantCode || !strings.Contains(p.Detail, tc.wantDetail) {
				t.Fatalf("status %d code %q detail %q; want %d %q containing %q", code, p.Code, p.Detail, tc.wantStatus, tc.wantCode, tc.wantDetail)
			}
		})
	}
	var list struct {
		Jobs []job `json:"jobs"`
	}
	if code := call(t, e.url, "GET", "/v1/jobs", nil, &list); code != 200 || len(list.Jobs) != 0 {
		t.Fatalf("refused jobs were stored: %d %+v", code, list.Jobs)
	}
	// A sound job on the live block is taken.
	if code := call(t, e.url, "POST", "/v1/jobs", map[string]any{"blockId": live.ID, "command": []string{"true"}}, nil); code != 201 {
		t.Fatalf("a sound job: %d", code)
	}
}
