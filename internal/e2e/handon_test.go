package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"capblock/internal/core"
	"capblock/internal/fleet"
	"capblock/internal/store"
)

// handOnFleet is two whole-node H100 nodes; limits are the test's.
const handOnFleet = `
currency: USD
instanceTypes:
  - {name: h100.8x, gpuModel: H100, gpusPerInstance: 8, onDemandPrice: "98.32"}
zones:
  - name: zone-a
    racks:
      - name: r1
        nodeGroups:
          - {prefix: h100-, count: 2, gpuModel: H100, gpus: 8}
limits: %s
`

// handOnEnv is the real stack on handOnFleet with limits, teams alpha and
// beta, and a member token of each.
type handOnEnv struct {
	*env
	f                   *authzFixture
	alphaTok, betaTok   string
	alpha, beta, admins string
}

func startHandOn(t *testing.T, limits string) *handOnEnv {
	e := startFleet(t, fmt.Sprintf(handOnFleet, limits))
	f := newAuthzFixture(e)
	return &handOnEnv{env: e, f: f, alpha: f.alpha, beta: f.beta, admins: e.team,
		alphaTok: f.token(core.RoleMember), betaTok: f.newToken(f.user(f.beta, "member-b", core.RoleMember))}
}

// buyAs buys one h100.8x for hours hours from t0+from hours, as the
// holder of token ("" for the admin).
func (h *handOnEnv) buyAs(token string, from, hours int) block {
	h.t.Helper()
	s := t0.Add(time.Duration(from) * time.Hour)
	var out struct {
		Offerings []offering `json:"offerings"`
	}
	q := searchQuery("h100.8x", 1, hours, s, s.Add(time.Duration(hours)*time.Hour))
	if code := call(h.t, h.url, "GET", "/v1/offerings?"+q, nil, &out, tok(token)...); code != 200 || len(out.Offerings) == 0 {
		h.t.Fatalf("search as %q: %d, %d offerings", token, code, len(out.Offerings))
	}
	var b block
	if code := call(h.t, h.url, "POST", "/v1/blocks", map[string]any{"offeringId": out.Offerings[0].OfferingID,
		"clientToken": fmt.Sprintf("h-%d", h.f.n.Add(1))}, &b, tok(token)...); code != 201 {
		h.t.Fatalf("buying as %q: %d", token, code)
	}
	return b
}

func tok(token string) []string {
	if token == "" {
		return nil
	}
	return []string{token}
}

// ledger is a team's entries as "kind subject amount" lines, sorted.
func (h *handOnEnv) ledger(team string) []string {
	h.t.Helper()
	entries, err := h.store.Ledger(context.Background(), team)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, l := range entries {
		out = append(out, fmt.Sprintf("%s %s %s", l.Kind, l.Subject, l.Amount))
	}
	sort.Strings(out) // entries of one instant come in id order
	return out
}

type handOnAnswer struct {
	Block    block  `json:"block"`
	Received *block `json:"received"`
	Handover struct {
		Kind           string `json:"kind"`
		BlockID        string `json:"blockId"`
		ToTeam         string `json:"toTeam"`
		GPUHours       int64  `json:"gpuHours"`
		ResoldGPUHours int64  `json:"resoldGpuHours"`
		Credited       money  `json:"credited"`
		Price          money  `json:"price"`
	} `json:"handover"`
}

// minor reads a decimal amount as minor units.
func minor(t *testing.T, amount string) int64 {
	m, err := fleet.ParseMoney(amount, "USD")
	if err != nil {
		t.Fatal(err)
	}
	return m.Minor
}

// TestTransferOverHTTP: team alpha's member transfers a block to beta
// for 100.00; beta cannot touch alpha's blocks; both ledgers are exact;
// the block's page shows the transfer.
func TestTransferOverHTTP(t *testing.T) {
	h := startHandOn(t, "{transfers: any}")
	b := h.buyAs(h.alphaTok, 2, 6)
	var p problem
	for _, path := range []string{"/transfer", "/release"} {
		if code := call(t, h.url, "POST", "/v1/blocks/"+b.ID+path, map[string]any{"team": h.beta}, &p, h.betaTok); code != 404 || p.Code != "not_found" {
			t.Errorf("beta's member on alpha's block %s: %d %s; want 404 not_found", path, code, p.Code)
		}
	}
	if code := call(t, h.url, "POST", "/v1/blocks/"+b.ID+"/transfer", map[string]any{"team": h.beta, "price": "-1.00"}, &p, h.alphaTok); code != 400 {
		t.Errorf("a negative price: %d %s; want 400", code, p.Code)
	}
	var a handOnAnswer
	if code := call(t, h.url, "POST", "/v1/blocks/"+b.ID+"/transfer", map[string]any{"team": h.beta, "price": "100.00"}, &a, h.alphaTok); code != 200 {
		t.Fatalf("transfer: %d", code)
	}
	if a.Block.State != "cancelled" || a.Received == nil || !a.Received.StartTime.Equal(b.StartTime) || a.Handover.GPUHours != 48 {
		t.Fatalf("transfer answer %+v; want the holder's cancelled, the whole block received, 48 GPU-hours", a)
	}
	if got, want := h.ledger(h.alpha), []string{"charge " + b.ID + " " + b.UpfrontFee.Amount, "credit " + b.ID + " 100.00"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("alpha's ledger %v; want %v", got, want)
	}
	if got, want := h.ledger(h.beta), []string{"charge " + a.Received.ID + " 100.00"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("beta's ledger %v; want %v", got, want)
	}
	var page struct {
		Team      string `json:"team"`
		Handovers []struct {
			Kind    string `json:"kind"`
			BlockID string `json:"blockId"`
			ToTeam  string `json:"toTeam"`
		} `json:"handovers"`
		Utilisation struct {
			Reserved float64 `json:"reserved"`
		} `json:"utilisation"`
	}
	if code := call(t, h.url, "GET", "/v1/blocks/"+a.Received.ID, nil, &page, h.betaTok); code != 200 ||
		page.Team != h.beta || len(page.Handovers) != 1 || page.Handovers[0].Kind != "transfer" || page.Handovers[0].BlockID != "" {
		t.Errorf("beta's page of the received block: %d %+v; want beta's, one transfer, not naming alpha's block", code, page)
	}
	// Alpha no longer holds the block: a second transfer is refused.
	if code := call(t, h.url, "POST", "/v1/blocks/"+b.ID+"/transfer", map[string]any{"team": h.beta}, &p, h.alphaTok); code != 409 || p.Code != "invalid_state" {
		t.Errorf("transferring the cancelled block: %d %s; want 409 invalid_state", code, p.Code)
	}
}

// TestTransferRefusedOverHTTP: the default policy needs an admin, "none"
// refuses everyone, and the receiver's quota applies; nothing changes.
func TestTransferRefusedOverHTTP(t *testing.T) {
	h := startHandOn(t, "{}")
	b := h.buyAs(h.alphaTok, 2, 6)
	var p problem
	if code := call(t, h.url, "POST", "/v1/blocks/"+b.ID+"/transfer", map[string]any{"team": h.beta}, &p, h.alphaTok); code != 403 || p.Code != "forbidden" {
		t.Errorf("a member under the admin policy: %d %s; want 403 forbidden", code, p.Code)
	}
	// The receiver's quota: beta may hold one instance at a time.
	if code := call(t, h.url, "PUT", "/v1/teams/"+h.beta+"/quotas", map[string]any{
		"maxInstancesPerBlock": 64, "maxInstancesHeld": 1, "maxDurationHours": 0, "maxLeadDays": 0}, &p); code != 200 {
		t.Fatalf("setting beta's quota: %d %+v", code, p)
	}
	h.buyAs(h.betaTok, 2, 6)
	if code := call(t, h.url, "POST", "/v1/blocks/"+b.ID+"/transfer", map[string]any{"team": h.beta}, &p); code != 403 || p.Code != "quota_exceeded" {
		t.Errorf("beyond the receiver's quota: %d %s %s; want 403 quota_exceeded", code, p.Code, p.Detail)
	}
	var got block
	call(t, h.url, "GET", "/v1/blocks/"+b.ID, nil, &got, h.alphaTok)
	if got.State != "scheduled" {
		t.Errorf("after refusals the block is %s; want scheduled", got.State)
	}

	none := startHandOn(t, "{transfers: none}")
	b = none.buyAs(none.alphaTok, 2, 6)
	if code := call(t, none.url, "POST", "/v1/blocks/"+b.ID+"/transfer", map[string]any{"team": none.beta}, &p); code != 403 || p.Code != "forbidden" {
		t.Errorf("an admin under the none policy: %d %s; want 403 forbidden", code, p.Code)
	}
}

// TestResaleOverHTTP: alpha releases a block of a full fleet; a search
// by beta finds it; beta buys 4 of its 10 hours; alpha is credited the
// fee's share of 32 of 80 GPU-hours less the 20% fee, and nothing more.
func TestResaleOverHTTP(t *testing.T) {
	h := startHandOn(t, "{resaleFeePercent: 20}")
	h.buyAs("", 2, 10)
	b := h.buyAs(h.alphaTok, 2, 10)
	s := t0.Add(4 * time.Hour)
	q := searchQuery("h100.8x", 1, 4, s, s.Add(4*time.Hour))
	if offs := h.offerings(q); len(offs) != 0 {
		t.Fatalf("a full fleet offers %d", len(offs))
	}
	var a handOnAnswer
	if code := call(t, h.url, "POST", "/v1/blocks/"+b.ID+"/release", nil, &a, h.alphaTok); code != 200 {
		t.Fatalf("release: %d", code)
	}
	if a.Block.State != "cancelled" || a.Handover.Kind != "release" || a.Handover.GPUHours != 80 {
		t.Fatalf("release answer %+v", a)
	}
	sold := h.buyAs(h.betaTok, 4, 4)
	credit := minor(t, b.UpfrontFee.Amount) * 32 * 80 / (80 * 100)
	want := []string{"charge " + b.ID + " " + b.UpfrontFee.Amount, "credit " + b.ID + " " + core.Money{Minor: credit}.String()}
	if got := h.ledger(h.alpha); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("alpha's ledger %v; want %v", got, want)
	}
	if got := h.ledger(h.beta); fmt.Sprint(got) != fmt.Sprint([]string{"charge " + sold.ID + " " + sold.UpfrontFee.Amount}) {
		t.Errorf("beta's ledger %v", got)
	}
	var page struct {
		Handovers []struct {
			ResoldGPUHours int64 `json:"resoldGpuHours"`
			Credited       money `json:"credited"`
		} `json:"handovers"`
	}
	if code := call(t, h.url, "GET", "/v1/blocks/"+b.ID, nil, &page, h.alphaTok); code != 200 || len(page.Handovers) != 1 ||
		page.Handovers[0].ResoldGPUHours != 32 || minor(t, page.Handovers[0].Credited.Amount) != credit {
		t.Errorf("alpha's page: %d %+v; want 32 GPU-hours resold, %d credited", code, page, credit)
	}
	// The hours go by unsold: nothing more is credited.
	h.advance(14 * time.Hour)
	if got := h.ledger(h.alpha); len(got) != 2 {
		t.Errorf("alpha's ledger %v; want the charge and one credit", got)
	}
	var u struct {
		Teams []struct {
			Team string `json:"team"`
		} `json:"teams"`
	}
	if code := call(t, h.url, "GET", "/v1/utilisation?team="+h.beta, nil, &u, h.betaTok); code != 200 || len(u.Teams) != 1 || u.Teams[0].Team != h.beta {
		t.Errorf("beta's utilisation: %d %+v", code, u)
	}
	if code := call(t, h.url, "GET", "/v1/utilisation?team="+h.beta, nil, &u, h.alphaTok); code != 404 {
		t.Errorf("alpha reading beta's utilisation: %d; want 404", code)
	}
}

// TestCLITransferAndRelease drives the built binary: a transfer and a
// release show their terms before they happen, need --yes without a
// terminal, and another team's member gets one line and a non-zero exit.
func TestCLITransferAndRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the capblock binary")
	}
	h := startHandOn(t, "{transfers: any}")
	bin := buildBinary(t)
	cli := func(token string, args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, bin, h.url, token, args...)
	}
	b := h.buyAs(h.alphaTok, 2, 6)
	if _, errOut, code := cli(h.alphaTok, "blocks", "transfer", b.ID, "--to", "beta", "--price", "100.00"); code != 2 || !strings.Contains(errOut, "--yes") {
		t.Errorf("transfer without --yes nor a terminal: exit %d, %q", code, errOut)
	}
	if _, errOut, code := cli(h.betaTok, "blocks", "release", b.ID, "--yes"); code == 0 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "not_found") {
		t.Errorf("beta releasing alpha's block: exit %d, %q; want one line saying not_found", code, errOut)
	}
	_, errOut, code := cli(h.alphaTok, "blocks", "transfer", b.ID, "--to", h.beta, "--price", "100.00", "--yes")
	if code != 0 || !strings.Contains(errOut, "it has not started: the whole block goes") ||
		!strings.Contains(errOut, "is charged 100.00 USD and you are credited it") || !strings.Contains(errOut, "transferred block "+b.ID) {
		t.Errorf("transfer: exit %d, stderr %q", code, errOut)
	}
	if got, want := h.ledger(h.beta), "charge"; len(got) != 1 || !strings.HasPrefix(got[0], want) || !strings.HasSuffix(got[0], " 100.00") {
		t.Errorf("beta's ledger %v; want one charge of 100.00", got)
	}
	r := h.buyAs(h.alphaTok, 2, 6)
	_, errOut, code = cli(h.alphaTok, "blocks", "release", r.ID, "--yes")
	if code != 0 || !strings.Contains(errOut, "unsold hours are not refunded") || !strings.Contains(errOut, "48 GPU-hours for resale at a 10% fee") {
		t.Errorf("release: exit %d, stderr %q", code, errOut)
	}
	out, _, _ := cli(h.alphaTok, "blocks", "show", r.ID)
	if !strings.Contains(out, "released for resale from 2026-12-01 02:00 UTC: 0 of 48 GPU-hours resold, 0.00 USD credited (10% resale fee)") {
		t.Errorf("blocks show of the released block:\n%s", out)
	}
	out, _, _ = cli(h.alphaTok, "-o", "json", "blocks", "show", r.ID)
	if !strings.Contains(out, `"kind": "release"`) && !strings.Contains(out, `"kind":"release"`) {
		t.Errorf("blocks show of the released block lacks its release:\n%s", out)
	}
}

// TestUtilisationOverHTTP: a week's block of 8 GPUs whose jobs' runs are
// stored (as the job runner stores them: job events in state running,
// then the job's next event) reports exact GPU-hours 120 hours in, on the
// block's page, in /v1/utilisation and in the spend report; another
// team's member sees none of it.
func TestUtilisationOverHTTP(t *testing.T) {
	h := startHandOn(t, "{}")
	b := h.buyAs(h.alphaTok, 1, 168)
	at := func(hr int) time.Time { return t0.Add(time.Duration(hr) * time.Hour) }
	jobs := []core.Job{
		{ID: "job-1", Team: h.alpha, BlockID: b.ID, Command: []string{"train"}, InstanceCount: 1, State: core.JobSucceeded, CreatedAt: at(11)},
		{ID: "job-2", Team: h.alpha, BlockID: b.ID, Command: []string{"train"}, InstanceCount: 1, State: core.JobRunning, CreatedAt: at(101)},
	}
	ev := func(id, job string, hr int, typ string, state core.JobState) core.Event {
		return core.Event{ID: id, Time: at(hr), Type: typ, Subject: job, Team: h.alpha, Data: map[string]any{"blockId": b.ID, "state": string(state)}}
	}
	if err := h.store.Commit(context.Background(), store.Change{Jobs: []store.JobWrite{{Job: jobs[0]}, {Job: jobs[1]}}, Events: []core.Event{
		ev("evt-u1", "job-1", 11, core.EventJobRunning, core.JobRunning),
		ev("evt-u2", "job-1", 31, core.EventJobSucceeded, core.JobSucceeded),
		ev("evt-u3", "job-2", 101, core.EventJobRunning, core.JobRunning),
	}}); err != nil {
		t.Fatal(err)
	}
	h.advance(121 * time.Hour)
	want := map[string]float64{"reserved": 960, "used": 320, "lent": 0, "idle": 640}
	var page struct {
		State       string             `json:"state"`
		Utilisation map[string]float64 `json:"utilisation"`
	}
	if code := call(t, h.url, "GET", "/v1/blocks/"+b.ID, nil, &page, h.alphaTok); code != 200 || page.State != "active" || fmt.Sprint(page.Utilisation) != fmt.Sprint(want) {
		t.Errorf("the block's page: %d %s %v; want active, %v", code, page.State, page.Utilisation, want)
	}
	var u struct {
		Blocks []struct {
			BlockID  string             `json:"blockId"`
			GPUHours map[string]float64 `json:"gpuHours"`
		} `json:"blocks"`
		Total map[string]float64 `json:"total"`
	}
	if code := call(t, h.url, "GET", "/v1/utilisation?team="+h.alpha, nil, &u, h.alphaTok); code != 200 || len(u.Blocks) != 1 ||
		u.Blocks[0].BlockID != b.ID || fmt.Sprint(u.Total) != fmt.Sprint(want) {
		t.Errorf("/v1/utilisation: %d %+v; want one block, %v", code, u, want)
	}
	// A window: the first day of the block (hours 1 to 25) holds job 1's 14.
	q := "/v1/utilisation?team=" + h.alpha + "&from=" + ts(at(1)) + "&to=" + ts(at(25))
	if code := call(t, h.url, "GET", q, nil, &u, h.alphaTok); code != 200 || u.Total["reserved"] != 192 || u.Total["used"] != 112 {
		t.Errorf("the first day: %d %v; want 192 reserved, 112 used", code, u.Total)
	}
	var sp struct {
		Rows []struct {
			Month    string             `json:"month"`
			GPUHours map[string]float64 `json:"gpuHours"`
		} `json:"rows"`
	}
	if code := call(t, h.url, "GET", "/v1/spend?team="+h.alpha, nil, &sp, h.alphaTok); code != 200 || len(sp.Rows) != 1 ||
		sp.Rows[0].Month != "2026-12" || fmt.Sprint(sp.Rows[0].GPUHours) != fmt.Sprint(want) {
		t.Errorf("spend: %d %+v; want one December row with %v", code, sp, want)
	}
	if code := call(t, h.url, "GET", "/v1/utilisation?team="+h.alpha, nil, &u, h.betaTok); code != 404 {
		t.Errorf("beta reading alpha's utilisation: %d; want 404", code)
	}
	if code := call(t, h.url, "GET", "/v1/utilisation?from="+ts(at(5))+"&to="+ts(at(2)), nil, &u, h.alphaTok); code != 400 {
		t.Errorf("a window that ends before it starts: %d; want 400", code)
	}
}
