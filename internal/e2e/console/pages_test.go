package console

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// hostileName is a block name that would run script if it were ever
// parsed as HTML.
const hostileName = `<img src=x onerror="document.body.dataset.pwned=1">`

// buy buys count × typ for hours from start (the first offering) under
// name, with token, and returns the block.
func (s *server) buy(t *testing.T, token, typ string, start time.Time, hours int, name string) block {
	t.Helper()
	var offers struct {
		Offerings []struct {
			OfferingID string `json:"offeringId"`
		} `json:"offerings"`
	}
	q := url.Values{"instanceType": {typ}, "instanceCount": {"1"}, "durationHours": {fmt.Sprint(hours)},
		"startAfter": {start.Format(time.RFC3339)}, "endBefore": {start.Add(time.Duration(hours) * time.Hour).Format(time.RFC3339)}, "zone": {"zone-a"}}
	s.call(t, token, "GET", "/v1/offerings?"+q.Encode(), nil, &offers, 200)
	if len(offers.Offerings) == 0 {
		t.Fatalf("no offering of %s from %s", typ, start)
	}
	var b block
	s.call(t, token, "POST", "/v1/blocks", map[string]any{"offeringId": offers.Offerings[0].OfferingID, "clientToken": fmt.Sprintf("%d-%d", start.Unix(), len(name)), "name": name}, &b, 201)
	return b
}

// signInAs opens the console with token in the tab's session storage, at
// path.
func (b *browser) signInAs(t *testing.T, srv *server, token, path string) {
	t.Helper()
	b.run(t, "opening the console", chromedp.Navigate(srv.url+"/"), chromedp.WaitVisible(chromedp.CSS("body")))
	eval[bool](t, b, fmt.Sprintf(`sessionStorage.setItem("capblock.token", %q), true`, token))
	b.run(t, "opening "+path, chromedp.Navigate(srv.url+path))
}

// setFilter picks value in a list's filter select, as a user does.
func (b *browser) setFilter(t *testing.T, key, value string) {
	t.Helper()
	eval[bool](t, b, fmt.Sprintf(`(() => { const s = document.querySelector("#filter-%s"); s.value = %q; s.dispatchEvent(new Event("change")); return s.value === %q; })()`, key, value, value))
}

// startOf is the start of the block id among blocks.
func startOf(blocks []block, id string) time.Time {
	for _, b := range blocks {
		if b.ID == id {
			return b.StartTime
		}
	}
	return time.Time{}
}

// rowsOf are the block ids of the blocks list's rows, in order.
func rowsOf(t *testing.T, b *browser) []string {
	t.Helper()
	return eval[[]string](t, b, `[...document.querySelectorAll("#blocks-list tbody tr")].map(r => r.dataset.block)`)
}

// things is what TestThingPages buys before it looks: the member's team
// and token, a second team, and blocks, a plan, a job, a series and an
// order of every kind its pages show.
type things struct {
	team, token, ops string
	workshops        []block
	cancelled        []string // by the member, before their start
	twin1, twin2     block
	hostile, llama   block
	handed, received block // transferred to ops for $100.00
	plan             struct {
		ID       string
		Segments []struct {
			BlockID string `json:"blockId"`
		}
	}
	job    struct{ ID string }
	series struct {
		ID          string
		Occurrences []struct {
			BlockID string `json:"blockId"`
		}
	}
	order struct{ ID string }
}

// buyThings buys 30 blocks of a workshop, 10 of them cancelled before
// their start (fully refunded); two blocks of one name; one of a hostile
// name; the block looked for, starting last; one transferred to ops for
// $100.00; a plan with a job; a series of 5 occurrences; and an order
// that waits.
func buyThings(t *testing.T, srv *server) *things {
	t.Helper()
	f := &things{}
	f.team, f.token = srv.member(t)
	token := f.token
	var ops struct{ ID string }
	srv.call(t, srv.admin, "POST", "/v1/teams", map[string]any{"name": "ops"}, &ops, 201)
	f.ops = ops.ID
	for i := range 30 {
		f.workshops = append(f.workshops, srv.buy(t, token, "l4.1x", t0.Add(time.Duration(2+5*i)*time.Hour), 4, fmt.Sprintf("workshop-%02d", i)))
	}
	for _, b := range f.workshops[:10] {
		srv.call(t, token, "POST", "/v1/blocks/"+b.ID+"/cancel", nil, nil, 200)
		f.cancelled = append(f.cancelled, b.ID)
	}
	f.twin1 = srv.buy(t, token, "l4.1x", t0.Add(200*time.Hour), 2, "twin")
	f.twin2 = srv.buy(t, token, "l4.1x", t0.Add(210*time.Hour), 2, "twin")
	f.hostile = srv.buy(t, token, "l4.1x", t0.Add(220*time.Hour), 2, hostileName)
	f.handed = srv.buy(t, token, "l4.1x", t0.Add(230*time.Hour), 2, "handed-on")
	var moved struct {
		Received block `json:"received"`
	}
	srv.call(t, srv.admin, "POST", "/v1/blocks/"+f.handed.ID+"/transfer", map[string]any{"team": ops.ID, "price": "100.00"}, &moved, 200)
	f.received = moved.Received
	f.cancelled = append(f.cancelled, f.handed.ID)
	f.llama = srv.buy(t, token, "l4.1x", t0.Add(400*time.Hour), 6, "llama-eval")

	var planOffers struct {
		PlanOfferings []struct {
			OfferingID string `json:"offeringId"`
		} `json:"planOfferings"`
	}
	q := url.Values{"instanceType": {"a100.8x"}, "instanceCount": {"1"}, "durationHours": {"8"}, "target": {"training-job"}, "maxSegments": {"2"},
		"startAfter": {t0.Add(3 * time.Hour).Format(time.RFC3339)}, "endBefore": {t0.Add(5 * 24 * time.Hour).Format(time.RFC3339)}}
	srv.call(t, token, "GET", "/v1/plan-offerings?"+q.Encode(), nil, &planOffers, 200)
	if len(planOffers.PlanOfferings) == 0 {
		t.Fatal("no plan offering")
	}
	srv.call(t, token, "POST", "/v1/plans", map[string]any{"offeringId": planOffers.PlanOfferings[0].OfferingID, "name": "pretrain", "clientToken": "pretrain"}, &f.plan, 201)
	srv.call(t, token, "POST", "/v1/jobs", map[string]any{"name": "pretrain-run", "planId": f.plan.ID, "command": []string{"sh", "-c", "echo training"}}, &f.job, 201)

	var seriesOffers struct {
		SeriesOfferings []struct {
			OfferingID string `json:"offeringId"`
		} `json:"seriesOfferings"`
	}
	srv.call(t, token, "POST", "/v1/series-offerings", map[string]any{"instanceType": "l4.1x", "instanceCount": 1, "zone": "zone-a",
		"daysOfWeek": []string{"weekdays"}, "startTime": "09:00", "endTime": "11:00", "timeZone": "UTC", "fromDate": "2026-12-02", "weeks": 1}, &seriesOffers, 200)
	if len(seriesOffers.SeriesOfferings) == 0 || seriesOffers.SeriesOfferings[0].OfferingID == "" {
		t.Fatalf("no series offering: %+v", seriesOffers)
	}
	srv.call(t, token, "POST", "/v1/series", map[string]any{"offeringId": seriesOffers.SeriesOfferings[0].OfferingID, "name": "team-workshop", "clientToken": "team-workshop"}, &f.series, 201)
	srv.call(t, token, "POST", "/v1/orders", map[string]any{"name": "big-run", "instanceType": "h100.8x", "instanceCount": 40, "zone": "zone-a", "durationHours": 8,
		"startAfter": t0.Add(10 * 24 * time.Hour).Format(time.RFC3339), "endBefore": t0.Add(12 * 24 * time.Hour).Format(time.RFC3339)}, &f.order, 201)
	return f
}

// TestThingPages: a block, a plan, a series, an order and a job each have
// a page of their own, in view when clicked from a long list, named in
// the URL by id or name (an unknown or ambiguous name says so), with its
// money and its actions, each saying what it costs or refunds first; the
// blocks list shows what each block was charged, refunded and credited,
// so that a fully refunded block nets 0 and a transferred block's hours
// are not counted twice; its filters and sort live in the URL and survive
// a reload. No browser error and no serious accessibility violation on
// any page. The steps are subtests, in order, on one server and tab.
func TestThingPages(t *testing.T) {
	br := newBrowser(t)
	srv := startServer(t, t0, "")
	f := buyThings(t, srv)
	team, token, workshops, cancelled := f.team, f.token, f.workshops, f.cancelled
	llama, plan, job, series, order := f.llama, f.plan, f.job, f.series, f.order
	var mine struct{ Blocks []block }
	srv.call(t, token, "GET", "/v1/blocks", nil, &mine, 200)
	refunded := workshops[0]
	fee := "$" + commas(refunded.UpfrontFee.Amount)
	llamaFee := "$" + commas(llama.UpfrontFee.Amount)

	// 1. The list, as the member: every block, with its money; no team
	//    filter (one team is all a member sees).
	t.Run("the list and its money", func(t *testing.T) {
		br.signInAs(t, srv, token, "/blocks")
		sums := eval[[]string](t, br, `import("/things.js").then(({ Cash }) => {
			const c = new Cash("USD"), d = new Cash("USD");
			for (const [kind, amount] of [["charge", "0.10"], ["charge", "0.20"], ["refund", "0.30"], ["credit", "1234567890123.45"], ["charge", "7"], ["spend", "5.00"]])
				c.add({ kind, amount: { amount, currency: "USD" } });
			d.add({ kind: "charge", amount: { amount: "-0.05", currency: "USD" } });
			return [c.charged.amount, c.refunds.amount, c.credits.amount, c.net.amount, c.less({ amount: "0.01" }).amount, d.plus(c).charged.amount];
		})`)
		if want := []string{"7.300000", "0.300000", "1234567890123.450000", "-1234567890116.450000", "-1234567890116.460000", "7.250000"}; !slices.Equal(sums, want) {
			t.Errorf("the console sums amounts as %v, want exactly %v", sums, want)
		}
		br.waitFor(t, "the blocks list", `document.querySelectorAll("#blocks-list tbody tr").length > 0`)
		if got := len(rowsOf(t, br)); got != len(mine.Blocks) {
			t.Errorf("the list shows %d blocks, want the team's %d", got, len(mine.Blocks))
		}
		if eval[bool](t, br, `document.querySelector("#filter-team") !== null`) {
			t.Error("a member is offered a team filter")
		}
		row := br.text(t, `tr[data-block="`+refunded.ID+`"]`)
		if !strings.Contains(row, "cancelled") || !strings.Contains(row, fee+fee+"$0.00$0.00") {
			t.Errorf("the fully refunded block's row reads %q, want charged %s, refunded %s, no credit and net $0.00", row, fee, fee)
		}
		br.capture(t, "blocks", "")
	})

	// 2. A click on the last row shows the block's page in view: its top
	//    inside the viewport, the list gone, the heading naming it.
	t.Run("a click shows the block in view", func(t *testing.T) {
		br.run(t, "opening the list", chromedp.Navigate(srv.url+"/blocks"))
		br.waitFor(t, "the blocks list", `document.querySelector("#blocks-list")`)
		br.run(t, "opening llama-eval from the list", chromedp.Click(chromedp.CSS(`#blocks-list a[href="/blocks/`+llama.ID+`"]`)))
		br.waitFor(t, "the block's page", `document.querySelector("#block-detail") && document.querySelector("#block-money")`)
		view := eval[struct {
			Top, Height float64
			List        bool
			Path, Title string
		}](t, br, `({top: document.querySelector("#block-detail").getBoundingClientRect().top, height: innerHeight,
			list: document.querySelector("#blocks-list") !== null, path: location.pathname, title: document.querySelector("#main h1").textContent})`)
		if view.Top < 0 || view.Top >= view.Height || view.List || view.Path != "/blocks/"+llama.ID || view.Title != "Block llama-eval" {
			t.Errorf("after the click: the detail's top at %.0f px of a %.0f px viewport, list drawn: %v, at %s, titled %q; want it in view, alone, at /blocks/%s titled Block llama-eval",
				view.Top, view.Height, view.List, view.Path, view.Title, llama.ID)
		}
		if m := br.text(t, "#block-money"); m != "Fee"+llamaFee+"Charged"+llamaFee+"Refunds$0.00Credits$0.00Net"+llamaFee {
			t.Errorf("llama-eval's money reads %q, want fee and charged %s, net %s", m, llamaFee, llamaFee)
		}
		if ev := br.text(t, "#block-detail"); !strings.Contains(ev, "block.scheduled") {
			t.Errorf("llama-eval's page shows no events: %q", ev)
		}
	})

	// 3. The fully refunded block's page: refunded in full, net 0.
	t.Run("a fully refunded block", func(t *testing.T) {
		br.run(t, "opening the refunded block", chromedp.Navigate(srv.url+"/blocks/"+refunded.ID))
		br.waitFor(t, "its money", `document.querySelector("#block-money")`)
		if m := br.text(t, "#block-money"); m != "Fee"+fee+"Charged"+fee+"Refunds"+fee+"Credits$0.00Net$0.00" {
			t.Errorf("the refunded block's money reads %q, want charged and refunded %s, net $0.00", m, fee)
		}
		if !strings.Contains(br.text(t, "#block-detail"), "block.cancelled") {
			t.Error("the refunded block's page shows no block.cancelled event")
		}
	})

	// 4. Names in the URL: one block's name opens it; an unknown name and
	//    an ambiguous one say so, the latter with a link to each; a
	//    hostile name is text.
	t.Run("names in the URL", func(t *testing.T) {
		br.run(t, "opening a block by name", chromedp.Navigate(srv.url+"/blocks/llama-eval"))
		br.waitFor(t, "llama-eval by name", `document.querySelector("#block-detail")`)
		if d := br.text(t, "#block-detail"); !strings.Contains(d, llama.ID) {
			t.Errorf("/blocks/llama-eval shows %q, want block %s", d, llama.ID)
		}
		br.run(t, "opening an unknown name", chromedp.Navigate(srv.url+"/blocks/no-such-block"))
		br.waitFor(t, "the message", `document.querySelector("main [role=alert]")`)
		if m := br.text(t, "main [role=alert]"); !strings.Contains(m, `No block is named “no-such-block”`) {
			t.Errorf("an unknown name reads %q", m)
		}
		br.run(t, "opening an ambiguous name", chromedp.Navigate(srv.url+"/blocks/twin"))
		br.waitFor(t, "the message", `document.querySelector("main [role=alert]")`)
		links := eval[[]string](t, br, `[...document.querySelectorAll("#ambiguous a")].map(a => a.getAttribute("href"))`)
		if m := br.text(t, "main [role=alert]"); !strings.Contains(m, `2 blocks are named “twin”`) || strings.Join(links, " ") != "/blocks/"+f.twin1.ID+" /blocks/"+f.twin2.ID {
			t.Errorf("an ambiguous name reads %q with links %v, want both twins", m, links)
		}
		br.checkAccessibility(t, "an ambiguous name")
		br.run(t, "opening the hostile name", chromedp.Navigate(srv.url+"/blocks/"+url.PathEscape(hostileName)))
		br.waitFor(t, "the hostile block", `document.querySelector("#block-detail")`)
		if d, title := br.text(t, "#block-detail"), br.text(t, "#main h1"); !strings.Contains(d, f.hostile.ID) || title != "Block "+hostileName ||
			eval[bool](t, br, `document.querySelector("main img") !== null || document.body.dataset.pwned === "1"`) {
			t.Errorf("the hostile name's page is titled %q and reads %q, or made an element", title, d)
		}
	})

	// 5. The plan's page, from the list and by name: its segments link to
	//    their blocks, its job and events are there.
	t.Run("a plan's page", func(t *testing.T) {
		br.run(t, "opening the list", chromedp.Navigate(srv.url+"/blocks"))
		br.waitFor(t, "the plans list", `document.querySelector('#plans-list a[href="/plans/`+plan.ID+`"]')`)
		br.run(t, "opening the plan", chromedp.Click(chromedp.CSS(`#plans-list a[href="/plans/`+plan.ID+`"]`)))
		br.waitFor(t, "the plan's page", `document.querySelector("#plan-detail")`)
		segs := eval[[]string](t, br, `[...document.querySelectorAll("#plan-segments tbody a")].map(a => a.getAttribute("href"))`)
		if len(segs) != len(plan.Segments) || len(segs) == 0 || segs[0] != "/blocks/"+plan.Segments[0].BlockID {
			t.Errorf("the plan's segments link to %v, want its %d blocks", segs, len(plan.Segments))
		}
		if d := br.text(t, "#plan-detail"); !strings.Contains(d, "pretrain-run") || !strings.Contains(d, "plan.scheduled") || br.text(t, "#main h1") != "Plan pretrain" {
			t.Errorf("the plan's page reads %q, want its job and its events", d)
		}
		top := eval[float64](t, br, `document.querySelector("#plan-detail").getBoundingClientRect().top`)
		if top < 0 || top >= 800 {
			t.Errorf("the plan's page starts %.0f px down", top)
		}
		br.capture(t, "plan", "")
		br.run(t, "opening the plan by name", chromedp.Navigate(srv.url+"/plans/pretrain"))
		br.waitFor(t, "the plan by name", `document.querySelector("#plan-detail")`)
		if d := br.text(t, "#plan-detail"); !strings.Contains(d, plan.ID) {
			t.Errorf("/plans/pretrain reads %q, want plan %s", d, plan.ID)
		}
	})

	// 6. The series' page, by name: its occurrences link to their blocks
	//    (whose pages link back); cancelling says what all of them refund.
	t.Run("a series' page", func(t *testing.T) {
		br.run(t, "opening the series by name", chromedp.Navigate(srv.url+"/series/team-workshop"))
		br.waitFor(t, "the series' page", `document.querySelector("#series-detail") && document.querySelector("#cancel-series")`)
		occ := eval[[]string](t, br, `[...document.querySelectorAll("#series-occurrences tbody a")].map(a => a.getAttribute("href"))`)
		if len(occ) != len(series.Occurrences) || len(occ) != 5 || occ[0] != "/blocks/"+series.Occurrences[0].BlockID {
			t.Errorf("the series' occurrences link to %v, want its 5 blocks", occ)
		}
		br.capture(t, "series", "")
		refund := 0.0
		for _, o := range series.Occurrences {
			var q struct {
				Refund struct{ Amount string } `json:"refund"`
			}
			srv.call(t, token, "GET", "/v1/blocks/"+o.BlockID+"/cancel-quote", nil, &q, 200)
			var f float64
			fmt.Sscan(q.Refund.Amount, &f)
			refund += f
		}
		wantRefund := "$" + commas(fmt.Sprintf("%.2f", refund))
		br.run(t, "cancelling the series", chromedp.Click(chromedp.CSS("#cancel-series")))
		br.waitFor(t, "the confirmation", `document.querySelector("dialog[open]")`)
		if terms := br.text(t, "dialog[open]"); !strings.Contains(terms, "Refund"+wantRefund) || !strings.Contains(terms, "Net after$0.00") {
			t.Errorf("cancelling the series reads %q, want the refund %s of its 5 occurrences and nothing left paid", terms, wantRefund)
		}
		br.run(t, "confirming", chromedp.Click(chromedp.CSS("#dlg-yes")))
		br.waitFor(t, "the cancelled series", `document.querySelector("#series-state") && document.querySelector("#series-state").textContent === "cancelled"`)
		if m := br.text(t, "#series-money"); !strings.Contains(m, "Refunds"+wantRefund) || !strings.HasSuffix(m, "Net$0.00") {
			t.Errorf("the cancelled series' money reads %q, want %s refunded, net $0.00", m, wantRefund)
		}
		br.run(t, "opening an occurrence", chromedp.Click(chromedp.CSS(`#series-occurrences a[href="/blocks/`+series.Occurrences[0].BlockID+`"]`)))
		br.waitFor(t, "the occurrence's page", `document.querySelector('#block-detail a[href="/series/`+series.ID+`"]')`)
	})

	// 7. The order's page, by name (40 instances where 32 are: it waits);
	//    cancelling it says it costs nothing.
	t.Run("an order's page", func(t *testing.T) {
		br.run(t, "opening the order by name", chromedp.Navigate(srv.url+"/orders/big-run"))
		br.waitFor(t, "the order's page", `document.querySelector("#order-detail") && document.querySelector("#cancel-order")`)
		if d := br.text(t, "#order-detail"); !strings.Contains(d, order.ID) || !strings.Contains(d, "order.created") {
			t.Errorf("the order's page reads %q, want its id and events", d)
		}
		br.run(t, "cancelling the order", chromedp.Click(chromedp.CSS("#cancel-order")))
		br.waitFor(t, "the confirmation", `document.querySelector("dialog[open]")`)
		br.run(t, "confirming", chromedp.Click(chromedp.CSS("#dlg-yes")))
		br.waitFor(t, "the cancelled order", `document.querySelector("#order-state") && document.querySelector("#order-state").textContent === "cancelled"`)
	})

	// 8. The plan's job by name: what it runs on, its events; stopping it
	//    says what it costs first.
	t.Run("a job's page", func(t *testing.T) {
		br.run(t, "opening the job by name", chromedp.Navigate(srv.url+"/jobs/pretrain-run"))
		br.waitFor(t, "the job's page", `document.querySelector("#job-detail") && document.querySelector("#stop-job")`)
		if d := br.text(t, "#job-detail"); !strings.Contains(d, job.ID) || !strings.Contains(d, "job.pending") ||
			!eval[bool](t, br, `document.querySelector('#job-detail a[href="/plans/`+plan.ID+`"]') !== null`) {
			t.Errorf("the job's page reads %q, want its id, its plan linked and its events", d)
		}
		br.run(t, "stopping the job", chromedp.Click(chromedp.CSS("#stop-job")))
		br.waitFor(t, "the confirmation", `document.querySelector("dialog[open]")`)
		if terms := br.text(t, "dialog[open]"); !strings.Contains(terms, "nothing is refunded") {
			t.Errorf("stopping reads %q, want what it costs", terms)
		}
		br.checkAccessibility(t, "the stop confirmation")
		br.run(t, "confirming", chromedp.Click(chromedp.CSS("#dlg-yes")))
		br.waitFor(t, "the stopped job", `document.querySelector("#job-state") && document.querySelector("#job-state").textContent === "stopped"`)
	})

	// 9. Hand-ons from a block's page, each saying first what moves: lend
	//     the idle GPUs, release another block for resale (worth its whole
	//     fee before its start, refunded nothing). A member cannot
	//     transfer (the fleet's default policy: administrators only).
	t.Run("hand-ons", func(t *testing.T) {
		lent, released := workshops[20], workshops[21]
		br.run(t, "opening a block to lend", chromedp.Navigate(srv.url+"/blocks/"+lent.ID))
		br.waitFor(t, "its lend button", `document.querySelector("#lend-block")`)
		if eval[bool](t, br, `document.querySelector("#transfer-block") !== null`) {
			t.Error("a member is offered a transfer")
		}
		br.run(t, "lending", chromedp.Click(chromedp.CSS("#lend-block")))
		br.waitFor(t, "the confirmation", `document.querySelector("dialog[open]")`)
		if terms := br.text(t, "dialog[open]"); !strings.Contains(terms, "share of the spot price") {
			t.Errorf("lending reads %q, want what it is credited", terms)
		}
		br.run(t, "confirming", chromedp.Click(chromedp.CSS("#dlg-yes")))
		br.waitFor(t, "the lending block", `document.querySelector("#lend-block") && document.querySelector("#lend-block").textContent === "Stop lending…"`)
		var lentNow struct{ Lending bool }
		srv.call(t, token, "GET", "/v1/blocks/"+lent.ID, nil, &lentNow, 200)
		if !lentNow.Lending {
			t.Error("after lending from the console, the block does not lend")
		}
		releasedFee := "$" + commas(released.UpfrontFee.Amount)
		br.run(t, "opening a block to release", chromedp.Navigate(srv.url+"/blocks/"+released.ID))
		br.waitFor(t, "its release button", `document.querySelector("#release-block")`)
		br.run(t, "releasing", chromedp.Click(chromedp.CSS("#release-block")))
		br.waitFor(t, "the confirmation", `document.querySelector("dialog[open]")`)
		if terms := br.text(t, "dialog[open]"); !strings.Contains(terms, "Worth"+releasedFee+" of the "+releasedFee+" paid") || !strings.Contains(terms, "Refundnone") ||
			!strings.Contains(terms, "is cancelled: it keeps no hour") {
			t.Errorf("releasing reads %q, want the whole fee %s handed on and no refund", terms, releasedFee)
		}
		br.checkAccessibility(t, "the release confirmation")
		br.run(t, "confirming", chromedp.Click(chromedp.CSS("#dlg-yes")))
		br.waitFor(t, "the released block", `document.querySelector("#block-handovers") && document.querySelector("#block-state").textContent === "cancelled"`)
		if d := br.text(t, "#block-handovers"); !strings.Contains(d, "Released for resale") {
			t.Errorf("the released block's hand-over reads %q", d)
		}
		if m := br.text(t, "#block-money"); !strings.HasSuffix(m, "Refunds$0.00Credits$0.00Net"+releasedFee) {
			t.Errorf("the released block's money reads %q, want nothing refunded yet", m)
		}
		if eval[bool](t, br, `document.querySelector("#cancel-block") !== null`) {
			t.Error("a released block can still be cancelled")
		}
	})

	// 10. Filters and sort live in the URL: cancelled blocks, latest first,
	//    still so after a reload.
	t.Run("filters kept across a reload", func(t *testing.T) {
		br.run(t, "opening the list", chromedp.Navigate(srv.url+"/blocks"))
		br.waitFor(t, "the blocks list", `document.querySelector("#blocks-list")`)
		br.setFilter(t, "state", "cancelled")
		br.setFilter(t, "sort", "-start")
		srv.call(t, token, "GET", "/v1/blocks", nil, &mine, 200)
		var wantRows []string
		live := 0
		for _, b := range mine.Blocks {
			switch b.State {
			case "cancelled":
				wantRows = append(wantRows, b.ID)
			case "payment-pending", "scheduled", "active":
				live++
			}
		}
		slices.SortStableFunc(wantRows, func(a, b string) int { return startOf(mine.Blocks, b).Compare(startOf(mine.Blocks, a)) })
		if len(wantRows) != len(cancelled)+5+1 {
			t.Fatalf("%d cancelled blocks, want the %d cancelled, the series' 5 and the one released", len(wantRows), len(cancelled))
		}
		for _, when := range []string{"filtered", "after a reload"} {
			if q := eval[string](t, br, "location.search"); q != "?state=cancelled&sort=-start" {
				t.Errorf("%s, the query is %q", when, q)
			}
			if got := rowsOf(t, br); strings.Join(got, " ") != strings.Join(wantRows, " ") {
				t.Errorf("%s, the rows are %v, want the cancelled blocks latest first %v", when, got, wantRows)
			}
			if when == "filtered" {
				br.run(t, "reloading", chromedp.Reload())
				br.waitFor(t, "the blocks list", `document.querySelector("#blocks-list")`)
			}
		}
		if v := eval[string](t, br, `document.querySelector("#filter-state").value + " " + document.querySelector("#filter-sort").value`); v != "cancelled -start" {
			t.Errorf("after a reload the filters read %q", v)
		}
		br.setFilter(t, "state", "live")
		if got := len(rowsOf(t, br)); got != live || live == 0 {
			t.Errorf("live blocks: %d rows, want %d", got, live)
		}
		br.checkAccessibility(t, "the filtered list")
		br.checkNoErrors(t)
	})

	// 11. As an administrator: a team filter, kept in the URL; the hours
	//    transferred are charged once (the receiver paid the price, the
	//    holder was credited it).
	t.Run("an administrator's list", func(t *testing.T) {
		br.signInAs(t, srv, srv.admin, "/blocks?team="+team)
		br.waitFor(t, "every team's list", `document.querySelector("#blocks-list") && document.querySelector("#filter-team")`)
		if v := eval[string](t, br, `document.querySelector("#filter-team").value`); v != team {
			t.Errorf("the team filter reads %q, want %s from the URL", v, team)
		}
		if got := len(rowsOf(t, br)); got != len(mine.Blocks) {
			t.Errorf("research's blocks: %d rows, want %d", got, len(mine.Blocks))
		}
		br.setFilter(t, "team", "")
		if q := eval[string](t, br, "location.search"); q != "" {
			t.Errorf("with every team, the query is %q, want none", q)
		}
		handedFee := "$" + commas(f.handed.UpfrontFee.Amount)
		if r := br.text(t, `tr[data-block="`+f.received.ID+`"]`); !strings.Contains(r, "ops") || !strings.Contains(r, "$100.00$0.00$0.00$100.00") {
			t.Errorf("the received block's row reads %q, want charged $100.00 and net $100.00", r)
		}
		if r := br.text(t, `tr[data-block="`+f.handed.ID+`"]`); !strings.Contains(r, handedFee+"$0.00$100.00") {
			t.Errorf("the transferred block's row reads %q, want charged %s and credited $100.00", r, handedFee)
		}
		br.run(t, "opening the received block", chromedp.Click(chromedp.CSS(`#blocks-list a[href="/blocks/`+f.received.ID+`"]`)))
		br.waitFor(t, "its hand-over", `document.querySelector("#block-handovers")`)
		if d := br.text(t, "#block-handovers"); !strings.Contains(d, "Received from research") {
			t.Errorf("the received block's hand-over reads %q", d)
		}
		br.checkAccessibility(t, "a received block")
	})

	// 12. An administrator transfers a block from its page, for a price
	//     said first.
	t.Run("an administrator's transfer", func(t *testing.T) {
		given := workshops[22]
		br.run(t, "opening a block to transfer", chromedp.Navigate(srv.url+"/blocks/"+given.ID))
		br.waitFor(t, "its transfer controls", `document.querySelector("#transfer-block")`)
		br.run(t, "transferring", chromedp.SetValue(chromedp.CSS("#transfer-team"), f.ops), chromedp.SetValue(chromedp.CSS("#transfer-price"), "50.00"),
			chromedp.Click(chromedp.CSS("#transfer-block")))
		br.waitFor(t, "the confirmation", `document.querySelector("dialog[open]")`)
		if terms := br.text(t, "dialog[open]"); !strings.Contains(terms, "Transfer for $50.00") || !strings.Contains(terms, "charged to ops and credited to research") {
			t.Errorf("the transfer reads %q, want its price and who pays it", terms)
		}
		br.run(t, "confirming", chromedp.Click(chromedp.CSS("#dlg-yes")))
		br.waitFor(t, "the transferred block", `document.querySelector("#block-handovers")`)
		if d := br.text(t, "#block-handovers"); !strings.Contains(d, "Transferred to ops") {
			t.Errorf("the transferred block's hand-over reads %q", d)
		}
	})

	// 13. A viewer reads a block's page and its money, and is offered no
	//     action.
	t.Run("a viewer's block page", func(t *testing.T) {
		var viewer struct{ ID string }
		srv.call(t, srv.admin, "POST", "/v1/users", map[string]any{"name": "vic", "team": team, "role": "viewer"}, &viewer, 201)
		var vtok struct{ Token string }
		srv.call(t, srv.admin, "POST", "/v1/users/"+viewer.ID+"/tokens", map[string]any{}, &vtok, 201)
		br.signInAs(t, srv, vtok.Token, "/blocks/llama-eval")
		br.waitFor(t, "the block for a viewer", `document.querySelector("#block-money")`)
		if m := br.text(t, "#block-money"); !strings.HasSuffix(m, "Net"+llamaFee) ||
			eval[bool](t, br, `document.querySelector("#block-detail .actions button") !== null`) {
			t.Errorf("a viewer reads money %q, or is offered an action", m)
		}
		br.checkNoErrors(t)
	})
	br.checkNoErrors(t)
}
