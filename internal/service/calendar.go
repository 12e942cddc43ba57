package service

import (
	"context"
	"fmt"
	"time"

	"capblock/internal/core"
)

// PriceCalendar prices every hourly start in the window, for the team's
// quota as Offerings does. It signs nothing: a start picked from it is
// bought through a search of that start alone.
func (s *Service) PriceCalendar(ctx context.Context, req core.SearchRequest) ([]core.PriceStart, error) {
	if req.Zone != "" && !s.knownZone(req.Zone) {
		return nil, core.Invalidf("unknown zone %q", req.Zone)
	}
	quotas, err := s.searchQuotas(ctx, req.Team, req.Types)
	if err != nil {
		return nil, err
	}
	req.Quotas = quotas
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.index.PriceCalendar(req, s.clock.Now())
}

// FleetCalendar reads the calendar from the index, under the read lock
// that searches share.
func (s *Service) FleetCalendar(_ context.Context, scope string, from time.Time, hours int) ([]core.PoolCalendar, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.index.FleetCalendar(scope, from, hours)
}

// CancelQuote decides a cancellation at the service's now and commits
// nothing: the refund CancelBlock would give at this moment.
func (s *Service) CancelQuote(ctx context.Context, team, id string) (core.Money, error) {
	b, err := s.GetBlock(ctx, team, id)
	if err != nil {
		return core.Money{}, err
	}
	basis, err := s.refundBasis(ctx, b)
	var refund core.Money
	if err == nil {
		_, refund, err = core.Cancel(b, s.clock.Now(), s.fleet.Limits, basis)
	}
	if err == nil {
		err = s.handedOn(ctx, b, "cancelled") // as CancelBlock refuses it
	}
	if err != nil {
		return core.Money{}, fmt.Errorf("quoting the cancellation of block %s: %w", id, err)
	}
	return refund, nil
}
