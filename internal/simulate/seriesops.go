package simulate

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// Series: a recurring window searched as a schedule, bought at once
// under a client token (retried with it), cancelled together. Each
// occurrence is a block, which the checker reads and checks as any
// other: bought once, charged once, charged its quoted fee.

// seriesRec is an acknowledged series purchase.
type seriesRec struct {
	id, team string
	req      contract.SeriesPurchaseRequest
	blocks   []string // its occurrences, by start
}

// seriesZones are the time zones schedules are written in: UTC, and
// two whose offsets are whole hours (an occurrence must start on the
// hour in UTC).
var seriesZones = []string{"UTC", "Europe/Madrid", "America/New_York"}

var weekdays = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// opSeries retries a series purchase whose answer was a fault, or buys
// one again under its client token, or searches a new one and buys it.
func (w *world) opSeries() {
	switch r := w.rng.IntN(8); {
	case r < 2 && len(w.m.waiting) > 0:
		w.retrySeries(w.m.waiting[0])
	case r < 3 && len(w.m.series) > 0:
		w.seriesAgain(w.m.series[w.rng.IntN(len(w.m.series))])
	default:
		w.searchSeries()
	}
}

// searchSeries searches a schedule of one to three days a week (or
// every weekday) over one or two weeks from up to two days ahead, and
// buys one of the offerings that can be bought.
func (w *world) searchSeries() {
	t := w.pickTeam()
	p, _ := w.caller(t)
	typ, count := w.pickType()
	hours := 1 + w.rng.IntN(6)
	start := w.rng.IntN(24)
	var days []string
	if w.rng.IntN(4) == 0 {
		days = []string{"weekdays"}
	} else {
		for range 1 + w.rng.IntN(3) {
			days = append(days, weekdays[w.rng.IntN(len(weekdays))])
		}
	}
	req := contract.SeriesSearchRequest{Team: t.id, InstanceType: typ, Count: count, Days: days,
		StartTime: fmt.Sprintf("%02d:00", start), EndTime: fmt.Sprintf("%02d:00", (start+hours)%24),
		TimeZone: seriesZones[w.rng.IntN(len(seriesZones))], FromDate: w.now().AddDate(0, 0, w.rng.IntN(3)).Format(time.DateOnly),
		Weeks: 1 + w.rng.IntN(2), Partial: w.rng.IntN(2) == 0}
	w.begin("series: %s for %s searches %d×%s on %v %s-%s %s from %s for %d weeks (partial %v)", p.User.Name, t.name, count, typ,
		days, req.StartTime, req.EndTime, req.TimeZone, req.FromDate, req.Weeks, req.Partial)
	offs, err := w.g.SeriesOfferings(w.as(p), req)
	if errors.Is(err, core.ErrQuotaExceeded) {
		w.count("series/quota")
		w.note("refused: %v", err)
		return
	}
	w.must(err)
	var buyable []core.SeriesOffering
	for _, o := range offs {
		if o.ID != "" {
			buyable = append(buyable, o)
		}
	}
	if len(buyable) == 0 {
		w.count("series/none")
		w.note("no offering to buy among %d", len(offs))
		return
	}
	off := buyable[w.rng.IntN(len(buyable))]
	w.buySeries(&pendingOp{kind: "series", squote: off,
		series: contract.SeriesPurchaseRequest{Team: t.id, OfferingID: off.ID, ClientToken: w.token(), Name: fmt.Sprintf("s%d", w.m.tokens)}})
}

// buySeries sends a series purchase (again, when retried) and records
// the answer.
func (w *world) buySeries(p *pendingOp) {
	t := w.teamOf(p.series.Team)
	caller, _ := w.caller(t)
	off := p.squote
	bought := off.Bought()
	w.begin("buy series of %d occurrences of %d×%s fee %d for %s, token %s (try %d)", len(bought), off.Count, off.InstanceType,
		off.Fee().Minor, t.name, p.series.ClientToken, p.tries+1)
	v, created, err := w.g.PurchaseSeries(w.as(caller), p.series)
	switch {
	case err == nil:
		w.count("series/bought")
		w.note("bought %s (created %v)", v.Series.ID, created)
		w.checkSeries(v.Series, p, created)
		w.m.waiting = slices.DeleteFunc(w.m.waiting, func(q *pendingOp) bool { return q == p })
	case injected(err):
		w.count("series/fault")
		w.note("fault: %v", err)
		if !slices.Contains(w.m.waiting, p) {
			w.m.waiting = append(w.m.waiting, p)
		}
	case errors.Is(err, core.ErrNoCapacity), errors.Is(err, core.ErrQuotaExceeded), errors.Is(err, core.ErrBudgetExceeded),
		errors.Is(err, core.ErrOfferingExpired), errors.Is(err, core.ErrOfferingUsed), errors.Is(err, core.ErrInvalidState):
		w.count("series/refused/" + reason(err))
		w.note("refused: %v", err)
		w.m.waiting = slices.DeleteFunc(w.m.waiting, func(q *pendingOp) bool { return q == p })
		// A refused purchase left nothing: no series under its token.
		if _, err := w.st.Idempotency(w.ctx, p.series.Team, p.series.ClientToken); !errors.Is(err, store.ErrNotFound) {
			w.fail("series purchase under token %s was refused, yet the token is stored (err %v)", p.series.ClientToken, err)
		}
	default:
		w.must(err)
	}
}

// retrySeries repeats a series purchase whose answer was a fault, as
// its client would: with its client token.
func (w *world) retrySeries(p *pendingOp) {
	p.tries++
	w.buySeries(p)
}

// checkSeries checks a series a purchase answered with against its
// quote: each occurrence bought is a block of the quoted window, count,
// type and zone, at the quoted fee (price honesty), charged once. A
// series answered from the store (created false: an answer lost before)
// may have changed since (an occurrence cancelled, extended, handed
// on): its windows must still be the quote's.
func (w *world) checkSeries(sr core.Series, p *pendingOp, created bool) {
	off := p.squote
	bought := off.Bought()
	if sr.Team != p.series.Team || sr.InstanceType != off.InstanceType || sr.Count != off.Count || sr.Zone != off.Zone {
		w.fail("series %s is %s's %d×%s in %s; the quote was %d×%s in %s for %s", sr.ID, w.teamName(sr.Team), sr.Count, sr.InstanceType,
			sr.Zone, off.Count, off.InstanceType, off.Zone, w.teamName(p.series.Team))
	}
	if len(sr.Occurrences) != len(bought) {
		w.fail("series %s has %d occurrences; its quote bought %d", sr.ID, len(sr.Occurrences), len(bought))
	}
	if sr.Fee != off.Fee() {
		w.fail("series %s costs %d; its quote said %d", sr.ID, sr.Fee.Minor, off.Fee().Minor)
	}
	rec := &seriesRec{id: sr.ID, team: sr.Team, req: p.series}
	for i, b := range sr.Occurrences {
		oc := bought[i]
		if !b.Start.Equal(oc.Start) || b.Count != off.Count || b.InstanceType != off.InstanceType || b.Zone != off.Zone {
			w.fail("occurrence %s of series %s is %d×%s in %s from %s; quoted %d×%s in %s from %s", b.ID, sr.ID, b.Count, b.InstanceType,
				b.Zone, b.Start.Format(time.RFC3339), off.Count, off.InstanceType, off.Zone, oc.Start.Format(time.RFC3339))
		}
		if created && (b.Team != sr.Team || !b.End.Equal(oc.End) || b.Fee != oc.Fee || b.State != core.StateScheduled) {
			w.fail("occurrence %s of series %s is %s's, %s until %s for %d; quoted until %s for %d", b.ID, sr.ID, w.teamName(b.Team), b.State,
				b.End.Format(time.RFC3339), b.Fee.Minor, oc.End.Format(time.RFC3339), oc.Fee.Minor)
		}
		rec.blocks = append(rec.blocks, b.ID)
		w.m.learn(b)
		w.chk.touch(b.ID)
		w.expectCharged(b.ID, oc.Fee.Minor)
	}
	w.m.series = append(w.m.series, rec)
}

// seriesAgain repeats an acknowledged series purchase with its client
// token: the same series, and no second charge; or, one time in three,
// the token with another name: refused, and nothing bought.
func (w *world) seriesAgain(sr *seriesRec) {
	t := w.teamOf(sr.team)
	caller, _ := w.caller(t)
	req := sr.req
	if w.rng.IntN(3) == 0 {
		req.Name += "-other"
		w.begin("series token %s reused with another name", req.ClientToken)
		if _, _, err := w.g.PurchaseSeries(w.as(caller), req); !errors.Is(err, core.ErrIdempotencyMismatch) {
			w.fail("series token %s reused with other parameters answered %v; want an idempotency mismatch", req.ClientToken, err)
		}
		w.count("series/mismatch")
		return
	}
	w.begin("series purchase again under token %s (series %s)", req.ClientToken, sr.id)
	charged := make([]int, len(sr.blocks))
	for i, id := range sr.blocks {
		charged[i] = w.chk.led.purchases[id]
	}
	v, created, err := w.g.PurchaseSeries(w.as(caller), req)
	switch {
	case err == nil:
		w.count("series/again")
		if created || v.Series.ID != sr.id {
			w.fail("series purchase under token %s again answered series %s (created %v); it bought %s", req.ClientToken, v.Series.ID, created, sr.id)
		}
		w.chk.expect = append(w.chk.expect, func() {
			for i, id := range sr.blocks {
				if n := w.chk.led.purchases[id]; n != charged[i] {
					w.fail("series purchase under token %s again: occurrence %s has %d purchase journals, %d before", req.ClientToken, id, n, charged[i])
				}
			}
		})
	case injected(err):
		w.count("series/fault")
		w.note("fault: %v", err)
	default:
		w.must(err)
	}
}

// opCancelSeries cancels a series with an occurrence live: every live
// occurrence is cancelled (released early, when active). A fault, or a
// refusal, leaves the client reading the series again: what each
// occurrence became is what the store holds.
func (w *world) opCancelSeries() {
	var sr *seriesRec
	for range 4 {
		if len(w.m.series) == 0 {
			break
		}
		s := w.m.series[w.rng.IntN(len(w.m.series))]
		if w.anyLive(s.blocks) {
			sr = s
			break
		}
	}
	if sr == nil {
		w.begin("cancel series: none live")
		return
	}
	t := w.teamOf(sr.team)
	caller, scope := w.caller(t)
	w.begin("cancel series %s of %s", sr.id, t.name)
	v, err := w.g.CancelSeries(w.as(caller), scope, sr.id)
	switch {
	case err == nil:
		w.count("cancelseries/done")
		for _, b := range v.Series.Occurrences {
			if b.State.Live() {
				w.fail("series %s cancelled, yet its occurrence %s is %s", sr.id, b.ID, b.State)
			}
		}
		w.learnSeries(v.Series)
		return
	case injected(err):
		w.count("cancelseries/fault")
		w.note("fault: %v", err)
	case errors.Is(err, core.ErrInvalidState):
		w.count("cancelseries/refused/" + reason(err))
		w.note("refused: %v", err)
	default:
		w.must(err)
	}
	v, err = w.g.GetSeries(w.as(caller), scope, sr.id)
	w.must(err)
	w.note("reads it %s", v.State)
	w.learnSeries(v.Series)
}

// learnSeries takes a series' occurrences as read or answered.
func (w *world) learnSeries(sr core.Series) {
	for _, b := range sr.Occurrences {
		w.m.learn(b)
		w.chk.touch(b.ID)
	}
}

// anyLive reports whether one of the blocks is live, as last read.
func (w *world) anyLive(ids []string) bool {
	for _, id := range ids {
		if w.chk.stored[id].State.Live() {
			return true
		}
	}
	return false
}

// checkSeriesStored checks that every acknowledged series is stored
// with the occurrences it was bought with.
func (w *world) checkSeriesStored() {
	if len(w.m.series) == 0 {
		return
	}
	all, err := w.st.ListSeries(w.ctx, "")
	if err != nil {
		w.fail("listing the series: %v", err)
	}
	stored := make(map[string]core.Series, len(all))
	for _, sr := range all {
		stored[sr.ID] = sr
	}
	for _, rec := range w.m.series {
		sr, ok := stored[rec.id]
		if !ok {
			w.fail("series %s, acknowledged bought, is not stored", rec.id)
		}
		if len(sr.Occurrences) != len(rec.blocks) {
			w.fail("series %s was bought with %d occurrences; %d are stored", rec.id, len(rec.blocks), len(sr.Occurrences))
		}
		for i, b := range sr.Occurrences {
			if b.ID != rec.blocks[i] {
				w.fail("occurrence %d of series %s is block %s; it was bought as %s", i+1, rec.id, b.ID, rec.blocks[i])
			}
		}
	}
}
