package console

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

type block struct {
	ID         string    `json:"id"`
	Team       string    `json:"team"`
	State      string    `json:"state"`
	StartTime  time.Time `json:"startTime"`
	EndTime    time.Time `json:"endTime"`
	UpfrontFee struct {
		Amount string `json:"amount"`
	} `json:"upfrontFee"`
}

// member makes team "research" with a member, and returns the team's id
// and the member's token.
func (s *server) member(t *testing.T) (team, token string) {
	t.Helper()
	var tm struct{ ID string }
	s.call(t, s.admin, "POST", "/v1/teams", map[string]any{"name": "research"}, &tm, 201)
	var u struct{ ID string }
	s.call(t, s.admin, "POST", "/v1/users", map[string]any{"name": "ada", "team": tm.ID, "role": "member"}, &u, 201)
	var tok struct{ Token string }
	s.call(t, s.admin, "POST", "/v1/users/"+u.ID+"/tokens", map[string]any{}, &tok, 201)
	s.call(t, s.admin, "PUT", "/v1/teams/"+tm.ID+"/budget", map[string]any{"amount": map[string]string{"amount": "250000.00", "currency": "USD"}, "period": "month"}, nil, 200)
	return tm.ID, tok.Token
}

// TestConsole walks the console as a member of a team, at both sizes,
// with the keyboard where it matters: sign in, search, pick a start from
// the price calendar, buy, see the block on the fleet calendar, move the
// simulated clock, see the block active with its countdown, extend it,
// follow a job's log, cancel another block and see the refund, read the
// spend.
// Every page passes axe-core with no serious or critical violation, and
// the browser reports no error at any point.
func TestConsole(t *testing.T) {
	br := newBrowser(t)
	srv := startServer(t, t0, "")
	team, token := srv.member(t)

	// Another team's block, which the member must see only as "taken",
	// and a failed node.
	var offers struct {
		Offerings []struct {
			OfferingID string `json:"offeringId"`
		} `json:"offerings"`
	}
	q := url.Values{"instanceType": {"h100.8x"}, "instanceCount": {"4"}, "durationHours": {"48"},
		"startAfter": {t0.Add(2 * time.Hour).Format(time.RFC3339)}, "endBefore": {t0.Add(7 * 24 * time.Hour).Format(time.RFC3339)}, "zone": {"zone-a"}}
	srv.call(t, srv.admin, "GET", "/v1/offerings?"+q.Encode(), nil, &offers, 200)
	var theirs block
	srv.call(t, srv.admin, "POST", "/v1/blocks", map[string]any{"offeringId": offers.Offerings[0].OfferingID, "clientToken": "theirs"}, &theirs, 201)
	srv.call(t, srv.admin, "POST", "/v1/admin/nodes/b-h100-32/fail", map[string]any{"reason": "GPU fell off the bus"}, nil, 200)

	// 1. Sign in, with the keyboard: the token and Enter.
	br.run(t, "opening the console", chromedp.Navigate(srv.url+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	br.capture(t, "signin", "")
	br.run(t, "signing in", chromedp.Focus(chromedp.CSS("#token")), chromedp.SendKeys(chromedp.CSS("#token"), token+kb.Enter))
	br.waitFor(t, "the fleet calendar", `document.querySelector("#heatmap[data-draw-ms]")`)
	if who := br.text(t, "#who"); !strings.Contains(who, "ada (member") {
		t.Errorf("signed in as %q, want ada, a member", who)
	}
	stored := eval[string](t, br, `sessionStorage.getItem("capblock.token") + "|" + localStorage.length + "|" + document.cookie`)
	if stored != token+"|0|" {
		t.Errorf("the token is kept as %q, want in session storage only", stored)
	}

	// 2. Search: 1 × h100.8x for 24 hours in the next two weeks.
	br.run(t, "opening Find capacity", chromedp.Click(chromedp.CSS(`a[href="/find"]`)), chromedp.WaitVisible(chromedp.CSS("#search")),
		chromedp.SetValue(chromedp.CSS("#type"), "h100.8x"), chromedp.SetValue(chromedp.CSS("#count"), "1"),
		chromedp.SetValue(chromedp.CSS("#hours"), "24"), chromedp.Click(chromedp.CSS("#search")))
	br.waitFor(t, "offerings and the price calendar", `document.querySelector("#buy-0") && document.querySelector(".pc-grid")`)
	if got := br.text(t, "#results"); !strings.Contains(got, "On demand") || !strings.Contains(got, "Saving") || !strings.Contains(got, "%)") {
		t.Errorf("the results show no fee against on demand: %q", got)
	}
	br.capture(t, "find", "#price-calendar h2")

	// 3. Pick a start from the price calendar with the keyboard: the grid
	//    holds one tab stop (the cheapest start); Home goes to the first
	//    start, ArrowRight to the next hour, Enter asks to buy it.
	br.run(t, "focusing the price calendar", chromedp.Focus(chromedp.CSS(`.pc-grid button[tabindex="0"]`)),
		chromedp.KeyEvent(kb.Home), chromedp.KeyEvent(kb.ArrowRight))
	cell := eval[struct{ Start, Label string }](t, br, `({start: document.activeElement.dataset.start, label: document.activeElement.getAttribute("aria-label")})`)
	if !strings.Contains(cell.Label, "available") || strings.Contains(cell.Label, "not available") {
		t.Fatalf("the second start is %q, want an available one", cell.Label)
	}
	fee := cell.Label[strings.Index(cell.Label, "$"):strings.Index(cell.Label, " in ")]
	br.run(t, "picking the start", chromedp.KeyEvent(kb.Enter))
	br.waitFor(t, "the confirmation", `document.querySelector("dialog[open]")`)
	terms := br.text(t, "dialog[open]")
	if !strings.Contains(terms, fee) || !strings.Contains(terms, "Buy for "+fee) || !strings.Contains(terms, "24 hours") {
		t.Errorf("the confirmation reads %q; want the terms and the fee %s of the start picked", terms, fee)
	}
	br.checkAccessibility(t, "the buy confirmation")
	br.run(t, "confirming", chromedp.Click(chromedp.CSS("#dlg-yes")))
	br.waitFor(t, "the purchase", `document.querySelector("#results .ok")`)
	picked := blockID(t, br.text(t, "#results .ok"))
	var a block
	srv.call(t, token, "GET", "/v1/blocks/"+picked, nil, &a, 200)
	if want, _ := time.Parse(time.RFC3339, cell.Start); !a.StartTime.Equal(want) || "$"+commas(a.UpfrontFee.Amount) != fee {
		t.Errorf("bought %s from %s for %s, want the start picked, %s for %s", a.ID, a.StartTime, a.UpfrontFee.Amount, cell.Start, fee)
	}

	// 4. Another block a week later, bought with the keyboard alone: Tab
	//    to its Buy button, Enter, Enter.
	br.run(t, "searching a week later", chromedp.SetValue(chromedp.CSS("#from"), t0.Add(7*24*time.Hour).Format("2006-01-02T15:04")),
		chromedp.SetValue(chromedp.CSS("#to"), t0.Add(14*24*time.Hour).Format("2006-01-02T15:04")),
		chromedp.Click(chromedp.CSS("#search")))
	br.waitFor(t, "new offerings", `document.querySelector("#buy-0") && !document.querySelector("#results .ok")`)
	br.run(t, "focusing Search", chromedp.Focus(chromedp.CSS("#search")))
	br.tabTo(t, "#buy-0")
	br.run(t, "pressing Enter on Buy", chromedp.KeyEvent(kb.Enter))
	br.waitFor(t, "the confirmation", `document.activeElement && document.activeElement.id === "dlg-yes"`)
	br.run(t, "confirming with Enter", chromedp.KeyEvent(kb.Enter))
	br.waitFor(t, "the second purchase", `document.querySelector("#results .ok")`)
	other := blockID(t, br.text(t, "#results .ok"))

	// 5. The fleet calendar shows the team's blocks, the failed node, and
	//    the other team's block only as taken GPUs.
	br.run(t, "opening the calendar", chromedp.Click(chromedp.CSS(`#results a[href="/calendar"]`)))
	br.waitFor(t, "the heat map", `document.querySelector("#heatmap[data-draw-ms]") && document.querySelector("table")`)
	summary := br.text(t, "main")
	for _, want := range []string{picked, other, "b-h100-32"} {
		if !strings.Contains(summary, want) {
			t.Errorf("the calendar does not show %s:\n%s", want, summary)
		}
	}
	for _, id := range []string{picked, other} {
		if !eval[bool](t, br, `document.querySelector('main table a[href="/blocks/`+id+`"]') !== null`) {
			t.Errorf("the calendar's summary does not link to block %s's page", id)
		}
	}
	cal := eval[string](t, br, `fetch("/v1/fleet-calendar", {headers: {Authorization: "Bearer " + sessionStorage.getItem("capblock.token")}}).then(r => r.text())`)
	if strings.Contains(cal, theirs.ID) || strings.Contains(cal, theirs.Team) || !strings.Contains(cal, `"taken":[0,0,32,`) {
		t.Errorf("the member's calendar names the other team's block, or misses its 32 GPUs taken from hour 2: %.400s", cal)
	}
	// The keyboard moves the cursor and zooms.
	br.run(t, "zooming with the keyboard", chromedp.Focus(chromedp.CSS("#heatmap")), chromedp.KeyEvent("+"), chromedp.KeyEvent(kb.ArrowRight))
	if info := br.text(t, "#cell-info"); !strings.Contains(info, "01:00 UTC") || !strings.Contains(info, "GPUs free") {
		t.Errorf("the cell under the cursor reads %q, want the hour 01:00 described", info)
	}
	pressed := eval[string](t, br, `document.querySelector('button[aria-pressed="true"]').textContent`)
	if pressed != "2 weeks" {
		t.Errorf("after +, the zoom is %q, want 2 weeks", pressed)
	}
	br.capture(t, "calendar", "")

	// 6. Move the simulated clock into the picked block: it is active, and
	//    its countdown runs.
	srv.call(t, srv.admin, "POST", "/v1/admin/clock", map[string]any{"now": a.StartTime.Add(90 * time.Minute).Format(time.RFC3339)}, nil, 200)
	waitState(t, srv, token, picked, "active")
	br.run(t, "opening the block", chromedp.Click(chromedp.CSS(`a[href="/blocks"]`)))
	br.waitFor(t, "the blocks", `document.querySelector('a[href="/blocks/`+picked+`"]')`)
	br.run(t, "opening the block", chromedp.Click(chromedp.CSS(`a[href="/blocks/`+picked+`"]`)))
	br.waitFor(t, "the active block", `document.querySelector("#block-state") && document.querySelector("#block-state").textContent === "active"`)
	first := br.text(t, "#block-left")
	if !strings.HasPrefix(first, "ends in 22h") {
		t.Errorf("the countdown reads %q, want about 22h30m left", first)
	}
	br.waitFor(t, "the countdown to tick", `document.querySelector("#block-left").textContent !== `+fmt.Sprintf("%q", first))
	if status := br.text(t, "#block-detail"); !strings.Contains(status, "1 total, 1 available, 0 unavailable") || !strings.Contains(status, "block.active") {
		t.Errorf("the block's status and events read %q", status)
	}
	br.capture(t, "block", "")
	// Extend it by 2 hours: the fee is shown before confirming.
	var ext struct {
		Offerings []struct {
			UpfrontFee struct{ Amount string } `json:"upfrontFee"`
			EndTime    time.Time               `json:"endTime"`
		} `json:"offerings"`
	}
	srv.call(t, token, "GET", "/v1/blocks/"+picked+"/extension-offerings?durationHours=2", nil, &ext, 200)
	br.run(t, "extending", chromedp.SetValue(chromedp.CSS("#extend-hours"), "2"), chromedp.Click(chromedp.CSS("#extend-block")))
	br.waitFor(t, "the extension's terms", `document.querySelector("dialog[open]")`)
	extFee := "$" + commas(ext.Offerings[0].UpfrontFee.Amount)
	if terms := br.text(t, "dialog[open]"); !strings.Contains(terms, "Extend for "+extFee) {
		t.Errorf("the extension reads %q, want its fee %s", terms, extFee)
	}
	br.run(t, "confirming", chromedp.Click(chromedp.CSS("#dlg-yes")))
	br.waitFor(t, "the longer block", `document.querySelector("#block-left") && document.querySelector("#block-left").textContent.startsWith("ends in 1d 0h")`)
	srv.call(t, token, "GET", "/v1/blocks/"+picked, nil, &a, 200)
	if !a.EndTime.Equal(ext.Offerings[0].EndTime) {
		t.Errorf("after extending, the block ends %s, want %s", a.EndTime, ext.Offerings[0].EndTime)
	}

	// 7. A job on the active block, and its live log.
	var job struct{ ID string }
	srv.call(t, token, "POST", "/v1/jobs", map[string]any{"name": "warm-up", "blockId": picked, "command": []string{"sh", "-c", "echo hello from the block; sleep 60"}}, &job, 201)
	br.run(t, "opening Jobs", chromedp.Click(chromedp.CSS(`a[href="/jobs"]`)))
	br.waitFor(t, "the job", `document.querySelector('a[href="/jobs/`+job.ID+`"]')`)
	br.capture(t, "jobs", "")
	br.run(t, "opening the job", chromedp.Click(chromedp.CSS(`a[href="/jobs/`+job.ID+`"]`)))
	br.waitFor(t, "the job's log", `document.querySelector("pre.log") && document.querySelector("pre.log").textContent.includes("hello from the block")`)
	br.capture(t, "job", "")

	// 8. Cancel the other block: the refund is shown before confirming,
	//    and is what the ledger refunds.
	var quote struct {
		Refund struct{ Amount string } `json:"refund"`
	}
	srv.call(t, token, "GET", "/v1/blocks/"+other+"/cancel-quote", nil, &quote, 200)
	br.run(t, "opening the other block", chromedp.Click(chromedp.CSS(`a[href="/blocks"]`)))
	br.waitFor(t, "the blocks", `document.querySelector('a[href="/blocks/`+other+`"]')`)
	br.run(t, "cancelling", chromedp.Click(chromedp.CSS(`a[href="/blocks/`+other+`"]`)))
	br.waitFor(t, "the block", `document.querySelector("#cancel-block")`)
	br.run(t, "cancelling", chromedp.Click(chromedp.CSS("#cancel-block")))
	br.waitFor(t, "the confirmation", `document.querySelector("dialog[open]")`)
	refund := "$" + commas(quote.Refund.Amount)
	if terms := br.text(t, "dialog[open]"); !strings.Contains(terms, "Refund"+refund) || !strings.Contains(terms, "Cancel and refund "+refund) {
		t.Errorf("the cancellation reads %q, want the refund %s", terms, refund)
	}
	br.run(t, "confirming", chromedp.Click(chromedp.CSS("#dlg-yes")))
	br.waitFor(t, "the cancelled block", `document.querySelector("#block-state") && document.querySelector("#block-state").textContent === "cancelled"`)
	if msg := br.text(t, "#toast"); !strings.Contains(msg, "refunded "+refund) {
		t.Errorf("after cancelling: %q, want the refund %s", msg, refund)
	}
	var ledger struct {
		Entries []struct {
			Kind    string
			Subject string
			Amount  struct{ Amount string }
		}
	}
	srv.call(t, token, "GET", "/v1/teams/"+team+"/ledger", nil, &ledger, 200)
	refunded := false
	for _, e := range ledger.Entries {
		refunded = refunded || (e.Kind == "refund" && e.Subject == other && e.Amount.Amount == quote.Refund.Amount)
	}
	if !refunded || quote.Refund.Amount == "0.00" {
		t.Errorf("the ledger has no refund of %s for %s: %+v", quote.Refund.Amount, other, ledger.Entries)
	}

	// 9. Spend and budget: the team's own.
	br.run(t, "opening Spend", chromedp.Click(chromedp.CSS(`a[href="/spend"]`)))
	br.waitFor(t, "the spend", `document.querySelector("meter")`)
	if s := br.text(t, "main"); !strings.Contains(s, "research") || !strings.Contains(s, "$250,000.00 per month") || !strings.Contains(s, "On demand") ||
		!strings.Contains(s, "Credits") || !strings.Contains(s, "Net") {
		t.Errorf("the spend page reads %q", s)
	}
	br.capture(t, "spend", "")
	br.checkNoErrors(t)
}

var blockIDPattern = strings.NewReplacer("Bought block ", "")

// blockID reads the block id from "Bought block cb-… (scheduled) …".
func blockID(t *testing.T, msg string) string {
	t.Helper()
	f := strings.Fields(blockIDPattern.Replace(msg))
	if len(f) == 0 || !strings.HasPrefix(f[0], "cb-") {
		t.Fatalf("no block id in %q", msg)
	}
	return f[0]
}

// commas writes an amount as the console does: 12345.60 → 12,345.60.
func commas(amount string) string {
	whole, frac, _ := strings.Cut(amount, ".")
	var b strings.Builder
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String() + "." + frac
}

// waitState polls the API until the block is in state.
func waitState(t *testing.T, srv *server, token, id, state string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var b block
		srv.call(t, token, "GET", "/v1/blocks/"+id, nil, &b, 200)
		if b.State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("block %s is %s after 20s, want %s", id, b.State, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
