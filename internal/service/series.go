package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// scheduleOf reads a series search's schedule: the days named, and the
// last date from toDate or from a number of weeks.
func scheduleOf(req contract.SeriesSearchRequest) (core.Schedule, error) {
	days, err := core.ParseDays(req.Days)
	if err != nil {
		return core.Schedule{}, err
	}
	sc := core.Schedule{Days: days, StartLocal: req.StartTime, EndLocal: req.EndTime, TimeZone: req.TimeZone,
		From: req.FromDate, To: req.ToDate}
	switch {
	case req.Weeks < 0:
		return sc, core.Invalidf("weeks %d: want a positive number of weeks", req.Weeks)
	case req.Weeks > 0 && req.ToDate != "":
		return sc, core.Invalidf("give toDate or weeks, not both")
	case req.Weeks > 0:
		from, err := time.Parse(time.DateOnly, req.FromDate)
		if err != nil {
			return sc, core.Invalidf("fromDate %q: want a date YYYY-MM-DD", req.FromDate)
		}
		sc.To = from.AddDate(0, 0, 7*req.Weeks-1).Format(time.DateOnly)
	case req.ToDate == "":
		return sc, core.Invalidf("give the last date (toDate) or a number of weeks")
	}
	return sc, nil
}

// SeriesOfferings quotes a recurring window in each zone of the type,
// best first, within the team's quota. An offering is signed when it can
// be bought: every occurrence fits, or, for a partial search, some do.
func (s *Service) SeriesOfferings(ctx context.Context, req contract.SeriesSearchRequest) ([]core.SeriesOffering, error) {
	sc, err := scheduleOf(req)
	if err != nil {
		return nil, err
	}
	r := core.SeriesSearchRequest{Type: req.InstanceType, Count: req.Count, Zone: req.Zone, Schedule: sc}
	if _, ok := s.fleet.Type(req.InstanceType); ok && req.Team != "" {
		q, err := s.effectiveQuota(ctx, req.Team, req.InstanceType)
		if err != nil {
			return nil, fmt.Errorf("searching series offerings: %w", err)
		}
		r.Quota = &q
	}
	s.mu.RLock()
	offers, err := s.index.SearchSeries(r, s.clock.Now())
	s.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	for i := range offers {
		o := &offers[i]
		if req.Partial || len(o.Bought()) == len(o.Occurrences) {
			o.Sign(s.secret)
		}
	}
	return offers, nil
}

// PurchaseSeries buys a series offering for a team: every occurrence it
// quotes becomes a scheduled block, stored with the series in one
// commit, or nothing is stored. The same client token with the same
// request returns the series bought the first time (created false); an
// offering buys one series. Each occurrence is charged its quoted fee.
func (s *Service) PurchaseSeries(ctx context.Context, req contract.SeriesPurchaseRequest) (contract.SeriesView, bool, error) {
	if err := core.CheckPrintable("name", req.Name); err != nil {
		return contract.SeriesView{}, false, err
	}
	hash := seriesPurchaseHash(req)
	return buyOnce(ctx, s, req.Team, req.ClientToken, hash, "series purchase",
		func() (contract.SeriesView, error) {
			sr, err := s.purchaseSeriesOnce(ctx, req, hash)
			if err != nil {
				return contract.SeriesView{}, s.explainUsedQuote(ctx, req.OfferingID, "this quote already bought a series (a quote buys one); "+
					"search again for a new quote, or repeat the first purchase's clientToken to get its series", err)
			}
			return seriesView(sr), nil
		},
		func(id string) (contract.SeriesView, error) {
			sr, err := s.store.Series(ctx, id)
			if err != nil {
				return contract.SeriesView{}, err
			}
			return seriesView(sr), nil
		})
}

func (s *Service) purchaseSeriesOnce(ctx context.Context, req contract.SeriesPurchaseRequest, hash string) (core.Series, error) {
	// 1. Verify the quote and load what the checks need.
	now := s.clock.Now()
	off, err := core.VerifySeriesOffering(s.secret, req.OfferingID, now)
	if err != nil {
		return core.Series{}, quoteRefused(err, "search again for a fresh quote")
	}
	t, q, guard, err := s.buyerTerms(ctx, req.Team, off.InstanceType, now)
	if err != nil {
		return core.Series{}, err
	}
	sr := core.Series{ID: newID("cs"), Name: req.Name, Team: req.Team, InstanceType: t.Name, Count: off.Count,
		Zone: off.Zone, Schedule: off.Schedule, Fee: off.Fee(), CreatedAt: now}
	occ := off.Occurrences
	releases, err := s.openReleases(ctx, t.GPUModel, occ[0].Start, occ[len(occ)-1].End)
	if err != nil {
		return core.Series{}, err
	}
	var pp *planPlacement
	err = s.withLock(func() error {
		window := want{t.GPUModel, off.Zone}
		return s.decideLocked(window, func() error {
			// 2. Each occurrence must pass the team's quota, like a block.
			for i, oc := range occ {
				if err := s.index.CheckQuota(req.Team, q, off.Count, oc.Start, oc.End, now); err != nil {
					return fmt.Errorf("occurrence %d of the series (%s): %w", i+1, oc.Start.Format(time.RFC3339), err)
				}
			}
			// 3. Place the occurrences one after another, each assumed under
			//    the series' id; the whole decision is forgotten unless the
			//    commit succeeds: all occurrences or none.
			pp = &planPlacement{ix: s.index, key: sr.ID}
			for i, oc := range occ {
				b := core.Block{
					ID: newID("cb"), Name: core.SeriesOccurrenceName(req.Name, i, len(occ)), Team: req.Team,
					InstanceType: t.Name, GPUModel: t.GPUModel, Count: off.Count, Zone: off.Zone,
					Start: oc.Start, End: oc.End, State: core.StateScheduled, Fee: oc.Fee, CreatedAt: now,
				}
				if err := pp.place(b, t, now); err != nil {
					s.index.Forget(sr.ID)
					return fmt.Errorf("occurrence %d of the series (%s to %s): %w", i+1,
						oc.Start.Format(time.RFC3339), oc.End.Format(time.RFC3339), err)
				}
			}
			return nil
		})
	})
	if err != nil {
		return core.Series{}, err
	}
	// 4. Commit the series, its blocks, charges and events at once.
	sr.Occurrences = pp.blocks
	c := store.Change{
		Insert:       pp.blocks,
		InsertSeries: []core.Series{sr},
		Offerings:    []string{off.ID},
		Idempotency: []store.IdempotencyRecord{{
			Team: req.Team, ClientToken: req.ClientToken, RequestHash: hash, Subject: sr.ID, CreatedAt: now,
		}},
		Budgets: guards(guard),
	}
	ids := make([]any, 0, len(pp.blocks))
	for i, b := range pp.blocks {
		ids = append(ids, b.ID)
		c.Journals = append(c.Journals, purchaseJournal(core.JournalPurchase, now, b, b.Fee, occ[i].OnDemandFee))
		c.Events = append(c.Events,
			s.event(now, core.EventBlockPurchased, b, map[string]any{"offeringId": off.ID, "seriesId": sr.ID,
				"upfrontFee": b.Fee.String(), "currency": b.Fee.Currency}),
			s.event(now, core.EventBlockScheduled, b, map[string]any{"from": string(core.StatePaymentPending), "to": string(core.StateScheduled)}))
	}
	c.Events = append(c.Events, seriesEvent(now, core.EventSeriesScheduled, sr, map[string]any{
		"offeringId": off.ID, "upfrontFee": sr.Fee.String(), "currency": sr.Fee.Currency, "occurrences": ids,
	}))
	s.resaleCredits(&c, pp.blocks, releases, now) // occurrences on capacity released for resale credit its holder
	s.addMoves(&c, pp.moves, now)
	s.addReserves(&c)
	err = s.commitAudited(ctx, c, now, sr.ID)
	s.settle(sr.ID, c, err)
	if err != nil {
		return core.Series{}, fmt.Errorf("storing series %s: %w", sr.ID, err)
	}
	sr.Occurrences = c.Insert // with their versions
	return sr, nil
}

// seriesPurchaseHash identifies a series purchase for idempotency; it
// differs from every block and plan purchase's.
func seriesPurchaseHash(req contract.SeriesPurchaseRequest) string {
	h := sha256.New()
	fmt.Fprintf(h, "series\n%q\n%q\n", req.OfferingID, req.Name)
	return hex.EncodeToString(h.Sum(nil))
}

func seriesEvent(at time.Time, typ string, sr core.Series, data map[string]any) core.Event {
	return core.Event{ID: newID("evt"), Time: at, Type: typ, Subject: sr.ID, Team: sr.Team, Data: data}
}

func seriesView(sr core.Series) contract.SeriesView {
	core.SortSegments(sr.Occurrences)
	return contract.SeriesView{Series: sr, State: core.SeriesStateOf(sr.Occurrences)}
}

// ListSeries returns a team's series (every team's for "").
func (s *Service) ListSeries(ctx context.Context, team string) ([]contract.SeriesView, error) {
	list, err := s.store.ListSeries(ctx, team)
	if err != nil {
		return nil, fmt.Errorf("listing series: %w", err)
	}
	out := make([]contract.SeriesView, 0, len(list))
	for _, sr := range list {
		out = append(out, seriesView(sr))
	}
	return out, nil
}

// GetSeries returns one of a team's series; another team's is not found.
func (s *Service) GetSeries(ctx context.Context, team, id string) (contract.SeriesView, error) {
	sr, err := s.store.Series(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && team != "" && sr.Team != team) {
		return contract.SeriesView{}, fmt.Errorf("%w: series %s", core.ErrNotFound, id)
	}
	if err != nil {
		return contract.SeriesView{}, fmt.Errorf("loading series %s: %w", id, err)
	}
	return seriesView(sr), nil
}

// CancelSeries cancels every occurrence of a series that has not ended:
// one still to come is cancelled, an active one released early, each
// refunded per the operator's policy as a block is (CancelBlock). One
// occurrence alone is cancelled as the block it is.
func (s *Service) CancelSeries(ctx context.Context, team, id string) (contract.SeriesView, error) {
	v, err := s.GetSeries(ctx, team, id)
	if err != nil {
		return contract.SeriesView{}, err
	}
	var cancelled []any
	for _, b := range v.Series.Occurrences {
		if !b.State.Live() {
			continue
		}
		if _, err := s.CancelBlock(ctx, team, b.ID); err != nil {
			return contract.SeriesView{}, fmt.Errorf("cancelling occurrence %s of series %s: %w", b.ID, id, err)
		}
		cancelled = append(cancelled, b.ID)
	}
	if len(cancelled) == 0 {
		return contract.SeriesView{}, fmt.Errorf("%w: series %s has no occurrence left to cancel (it is %s)", core.ErrInvalidState, id, v.State)
	}
	now := s.clock.Now()
	ev := seriesEvent(now, core.EventSeriesCancelled, v.Series, map[string]any{"occurrences": cancelled})
	if err := s.commitAudited(ctx, store.Change{Events: []core.Event{ev}}, now, id); err != nil {
		return contract.SeriesView{}, fmt.Errorf("recording the cancellation of series %s: %w", id, err)
	}
	s.notifyEvents()
	return s.GetSeries(ctx, team, id)
}
