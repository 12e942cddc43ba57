package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestCLIPlansCancel: a plan of two segments, the first active, is
// cancelled with `plans cancel`: it shows each segment and its refund
// under the policy before acting, then the plan is cancelled, both
// segments ended (the active one released, the other cancelled), the
// second refunded in full and the first not at all, and one plan.cancelled
// event recorded. Cancelling it again is one line and a non-zero exit.
func TestCLIPlansCancel(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the CLI binary")
	}
	e := start(t)
	bin := buildBinary(t)
	token, _ := tokens.Load(e.url)
	cli := func(args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, bin, e.url, token.(string), args...)
	}

	// Two segments: every l4.1x is taken from +6h to +7h, so 8 hours
	// between +2h and +12h come in two pieces.
	gap := t0.Add(6 * time.Hour)
	if _, code := e.buy(e.exact(searchQuery("l4.1x", 8, 1, gap, gap.Add(time.Hour)), 1, gap).OfferingID, "the-gap"); code != 201 {
		t.Fatalf("buying the gap: %d", code)
	}
	offers := e.planOfferings(planQuery("l4.1x", 1, 8, 2, t0.Add(2*time.Hour), t0.Add(12*time.Hour)))
	var offer planOffering
	for _, o := range offers {
		if len(o.Segments) == 2 {
			offer = o
			break
		}
	}
	if offer.OfferingID == "" {
		t.Fatalf("no two-segment plan offering among %d", len(offers))
	}
	var p plan
	if code := call(t, e.url, "POST", "/v1/plans", map[string]any{"offeringId": offer.OfferingID, "clientToken": "cancel-me", "name": "ft"}, &p); code != 201 {
		t.Fatalf("buying the plan: %d", code)
	}
	e.advance(offer.Segments[0].StartTime.Sub(t0) + time.Minute) // the first segment is active

	_, errOut, code := cli("plans", "cancel", "ft")
	if code != 2 || !strings.Contains(errOut, "pass --yes") {
		t.Errorf("without a terminal or --yes: exit %d, stderr %q", code, errOut)
	}
	out, errOut, code := cli("plans", "cancel", "ft", "--yes")
	if code != 0 {
		t.Fatalf("plans cancel: exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		"cancelling plan " + p.ID + " (ft) (active, 1 × l4.1x): 2 of its 2 segments",
		"segment " + p.Segments[0].BlockID + ": active", "no refund, an early release",
		"segment " + p.Segments[1].BlockID + ": scheduled", "it has not started: refund " + offer.Segments[1].UpfrontFee.Amount + " USD (100% of the fee before the start",
		"cancelled plan " + p.ID + ": refunded " + offer.Segments[1].UpfrontFee.Amount + " USD",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr has no %q:\n%s", want, errOut)
		}
	}
	if !strings.Contains(out, "state:") || !strings.Contains(out, "cancelled") {
		t.Errorf("stdout does not show the cancelled plan:\n%s", out)
	}
	var got plan
	if code := call(t, e.url, "GET", "/v1/plans/"+p.ID, nil, &got); code != 200 || got.State != "cancelled" {
		t.Fatalf("plan after cancel: %d %s", code, got.State)
	}
	for _, s := range got.Segments {
		if s.State != "cancelled" {
			t.Errorf("segment %s is %s, want cancelled", s.BlockID, s.State)
		}
	}
	n := 0
	for _, ev := range e.events() {
		if ev.Type == "plan.cancelled" && ev.Subject == p.ID {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d plan.cancelled events, want 1", n)
	}

	out, errOut, code = cli("plans", "cancel", p.ID, "--yes")
	if code == 0 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "nothing to cancel") {
		t.Errorf("cancelling again: exit %d, stdout %q, stderr %q; want one line and a non-zero exit", code, out, errOut)
	}
}
