package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// Standing orders wait for capacity that is not free yet. The leading
// replica serves the open ones, oldest first, whenever capacity may have
// freed (a block cancelled or ended early, a node recovered, an order
// placed, the simulated clock moved) and every ordersPoll otherwise: an
// order whose request fits is notified (order.fits, with a quote) or, in
// buy mode, bought through the purchase path (quota, budget, a client
// token made from the order's id) within its maxFee, the order's change
// committed with the block. An order still open at its deadline expires.

// ordersPoll is how often, on the wall clock, the leader serves the
// standing orders when nothing wakes it: commits of other replicas free
// capacity without a kick here.
const ordersPoll = 10 * time.Second

// maxOpenOrders bounds a team's open orders: each costs a search on
// every pass of the leader.
const maxOpenOrders = 100

// CreateOrder places a standing order for a team. The request must be
// one a search accepts (type, count, duration, window, zone), within the
// team's quota; a buy order needs a maxFee in the fleet's currency.
func (s *Service) CreateOrder(ctx context.Context, req contract.OrderRequest) (core.Order, error) {
	now := s.clock.Now()
	o, err := s.newOrder(ctx, req, now)
	if err != nil {
		return core.Order{}, err
	}
	c := store.Change{InsertOrders: []core.Order{o}, Events: []core.Event{orderEvent(now, core.EventOrderCreated, o, orderData(o, nil))}}
	if err := s.commitAudited(ctx, c, now, o.ID); err != nil {
		return core.Order{}, fmt.Errorf("storing order %s: %w", o.ID, err)
	}
	s.notifyEvents()
	s.kickOrders()
	return c.InsertOrders[0], nil
}

func (s *Service) newOrder(ctx context.Context, req contract.OrderRequest, now time.Time) (core.Order, error) {
	if err := core.CheckPrintable("name", req.Name); err != nil {
		return core.Order{}, err
	}
	switch req.Mode {
	case core.OrderNotify, core.OrderBuy:
	case "":
		req.Mode = core.OrderNotify
	default:
		return core.Order{}, core.Invalidf("mode %q: want notify or buy", req.Mode)
	}
	if req.Mode == core.OrderBuy && req.MaxFee.Minor <= 0 {
		return core.Order{}, core.Invalidf("a buy order needs a positive maxFee: the most its block may cost")
	}
	if req.MaxFee.Minor != 0 && req.MaxFee.Currency != s.fleet.Currency {
		return core.Order{}, core.Invalidf("maxFee currency %q: this fleet prices in %s", req.MaxFee.Currency, s.fleet.Currency)
	}
	if req.Zone != "" && !s.knownZone(req.Zone) {
		return core.Order{}, core.Invalidf("unknown zone %q", req.Zone)
	}
	if _, ok := s.fleet.Type(req.InstanceType); !ok {
		return core.Order{}, core.Invalidf("unknown instance type %q (GET /v1/instance-types lists them)", req.InstanceType)
	}
	if req.Duration <= 0 || req.Duration%time.Hour != 0 {
		return core.Order{}, core.Invalidf("duration %s: want a whole number of hours", req.Duration)
	}
	if !req.EndBefore.After(req.StartAfter.Add(req.Duration)) && !req.EndBefore.Equal(req.StartAfter.Add(req.Duration)) {
		return core.Order{}, core.Invalidf("the window from %s to %s is shorter than the duration %s",
			req.StartAfter.Format(time.RFC3339), req.EndBefore.Format(time.RFC3339), req.Duration)
	}
	o := core.Order{ID: newID("ord"), Name: req.Name, Team: req.Team, Mode: req.Mode, InstanceType: req.InstanceType,
		Count: req.Count, Zone: req.Zone, Duration: req.Duration, StartAfter: req.StartAfter, EndBefore: req.EndBefore,
		Deadline: req.Deadline, MaxFee: req.MaxFee, State: core.OrderOpen, CreatedAt: now, UpdatedAt: now}
	if o.MaxFee.Minor == 0 {
		o.MaxFee.Currency = s.fleet.Currency
	}
	if o.Deadline.IsZero() || o.Deadline.After(o.LatestStart()) {
		o.Deadline = o.LatestStart() // no block fits later
	}
	if !o.Deadline.After(now) {
		return core.Order{}, core.Invalidf("the order's deadline %s has passed: the window ends too soon for a %s block",
			o.Deadline.Format(time.RFC3339), req.Duration)
	}
	open, err := s.store.ListOrders(ctx, req.Team, core.OrderOpen)
	if err != nil {
		return core.Order{}, fmt.Errorf("counting the open orders of team %s: %w", req.Team, err)
	}
	if len(open) >= maxOpenOrders {
		return core.Order{}, fmt.Errorf("%w: the team has %d open orders, the most it may have; cancel one first", core.ErrQuotaExceeded, len(open))
	}
	// A search refuses what the order could never buy.
	if _, err := s.searchOrder(ctx, o, now); err != nil && !errors.Is(err, errOrderWindowAhead) {
		return core.Order{}, err
	}
	return o, nil
}

// errOrderWindowAhead says that an order's window starts beyond the
// booking horizon: it is searched once the horizon reaches it.
var errOrderWindowAhead = errors.New("the window starts beyond the booking horizon")

// searchOrder searches the offerings that would serve o at now, within
// its team's quota.
func (s *Service) searchOrder(ctx context.Context, o core.Order, now time.Time) ([]core.Offering, error) {
	if o.StartAfter.After(now.Add(s.fleet.Limits.MaxLeadTime)) {
		return nil, errOrderWindowAhead
	}
	quotas, err := s.searchQuotas(ctx, o.Team, []string{o.InstanceType})
	if err != nil {
		return nil, err
	}
	req := core.SearchRequest{Types: []string{o.InstanceType}, Count: o.Count, Duration: o.Duration,
		StartAfter: o.StartAfter, EndBefore: o.EndBefore, Zone: o.Zone, Team: o.Team, Quotas: quotas}
	s.mu.RLock()
	offers, err := s.index.Search(req, now)
	s.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	exact := offers[:0]
	for _, off := range offers {
		if !off.Alternative {
			exact = append(exact, off)
		}
	}
	return exact, nil
}

// ListOrders returns a team's orders (every team's for ""), oldest first.
func (s *Service) ListOrders(ctx context.Context, team string) ([]core.Order, error) {
	orders, err := s.store.ListOrders(ctx, team, "")
	if err != nil {
		return nil, fmt.Errorf("listing orders: %w", err)
	}
	return orders, nil
}

// GetOrder returns one of a team's orders; another team's is not found.
func (s *Service) GetOrder(ctx context.Context, team, id string) (core.Order, error) {
	o, err := s.store.Order(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && team != "" && o.Team != team) {
		return core.Order{}, fmt.Errorf("%w: order %s", core.ErrNotFound, id)
	}
	if err != nil {
		return core.Order{}, fmt.Errorf("loading order %s: %w", id, err)
	}
	return o, nil
}

// CancelOrder withdraws an open order.
func (s *Service) CancelOrder(ctx context.Context, team, id string) (core.Order, error) {
	for attempt := 1; ; attempt++ {
		o, err := s.GetOrder(ctx, team, id)
		if err != nil {
			return core.Order{}, err
		}
		now := s.clock.Now()
		cancelled, err := core.CancelOrder(o, now)
		if err != nil {
			return core.Order{}, err
		}
		err = s.commitOrder(ctx, o, cancelled, core.EventOrderCancelled, nil, true)
		if err == nil || !store.IsConflict(err) || attempt == maxCommitAttempts {
			return cancelled, err // a conflict: the leader served it meanwhile
		}
	}
}

// commitOrder stores o's change to next, with an event of typ when typ
// is not "" (and the request's audit record when audited).
func (s *Service) commitOrder(ctx context.Context, o, next core.Order, typ string, data map[string]any, audited bool) error {
	c := store.Change{UpdateOrders: []store.OrderUpdate{{Order: next, ExpectedVersion: o.Version}}}
	if typ != "" {
		c.Events = []core.Event{orderEvent(next.UpdatedAt, typ, next, orderData(next, data))}
	}
	var err error
	if audited {
		err = s.commitAudited(ctx, c, next.UpdatedAt, o.ID)
	} else {
		err = s.store.Commit(ctx, c)
	}
	if err != nil {
		return fmt.Errorf("storing order %s: %w", o.ID, err)
	}
	if typ != "" {
		s.notifyEvents()
	}
	return nil
}

// kickOrders wakes the leader to serve the standing orders; on a replica
// that does not lead, nobody listens and the kick waits for nothing.
func (s *Service) kickOrders() {
	select {
	case s.ordersKick <- struct{}{}:
	default:
	}
}

// ServeOrders serves the open standing orders once, oldest first: each
// expires at its deadline, or is notified or bought once it fits. The
// leader runs it (Run); tests call it directly.
func (s *Service) ServeOrders(ctx context.Context) error {
	orders, err := s.store.ListOrders(ctx, "", core.OrderOpen)
	if err != nil {
		return fmt.Errorf("listing the open orders: %w", err)
	}
	for _, o := range orders {
		if err := s.serveOrder(ctx, o); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s.log.Warn("serving a standing order", "order", o.ID, "err", err)
		}
	}
	return nil
}

// serveOrder expires, notifies or buys one open order, or records why it
// waits.
func (s *Service) serveOrder(ctx context.Context, o core.Order) error {
	now := s.clock.Now()
	// 1. Expire it at its deadline.
	if !now.Before(o.Deadline) {
		next := o
		next.State, next.UpdatedAt = core.OrderExpired, now
		return s.commitOrder(ctx, o, next, core.EventOrderExpired, nil, false)
	}
	// 2. Search, and pick the best offering within the maximum fee.
	offers, err := s.searchOrder(ctx, o, now)
	if err != nil {
		return s.orderWaits(ctx, o, reasonText(err), now)
	}
	var pick *core.Offering
	for i := range offers {
		if o.Mode == core.OrderNotify || offers[i].Fee.Minor <= o.MaxFee.Minor {
			pick = &offers[i]
			break
		}
	}
	switch {
	case len(offers) == 0:
		return s.orderWaits(ctx, o, "no capacity fits the request yet", now)
	case pick == nil:
		return s.orderWaits(ctx, o, fmt.Sprintf("the cheapest block that fits costs %s %s, above maxFee %s %s",
			cheapest(offers), offers[0].Fee.Currency, o.MaxFee, o.MaxFee.Currency), now)
	}
	pick.Sign(s.secret)
	// 3. Notify, or buy.
	if o.Mode == core.OrderNotify {
		next := o
		next.State, next.Reason, next.UpdatedAt = core.OrderNotified, "", now
		return s.commitOrder(ctx, o, next, core.EventOrderFits, offerData(*pick), false)
	}
	req := contract.PurchaseRequest{Team: o.Team, OfferingID: pick.ID, ClientToken: "order-" + o.ID, Name: orderBlockName(o)}
	_, err = s.purchaseOnce(ctx, req, purchaseHash(req), func(b core.Block, c *store.Change, now time.Time) error {
		next := o
		next.State, next.BlockID, next.Reason, next.UpdatedAt = core.OrderBought, b.ID, "", now
		c.UpdateOrders = append(c.UpdateOrders, store.OrderUpdate{Order: next, ExpectedVersion: o.Version})
		c.Events = append(c.Events, orderEvent(now, core.EventOrderBought, next, orderData(next, offerData(*pick))))
		return nil
	})
	if err != nil {
		if store.IsConflict(err) {
			return nil // capacity or the order changed meanwhile: the next pass sees
		}
		return s.orderWaits(ctx, o, "the purchase was refused: "+reasonText(err), now)
	}
	return nil
}

// orderWaits records why an open order waits, when the reason changed.
func (s *Service) orderWaits(ctx context.Context, o core.Order, reason string, now time.Time) error {
	if o.Reason == reason {
		return nil
	}
	next := o
	next.Reason, next.UpdatedAt = reason, now
	err := s.commitOrder(ctx, o, next, "", nil, false)
	if store.IsConflict(err) {
		return nil
	}
	return err
}

// reasonText is an error as an order's reason: its message.
func reasonText(err error) string {
	if errors.Is(err, errOrderWindowAhead) {
		return err.Error() + "; it is searched once the horizon reaches it"
	}
	return err.Error()
}

func cheapest(offers []core.Offering) core.Money {
	m := offers[0].Fee
	for _, o := range offers {
		if o.Fee.Minor < m.Minor {
			m = o.Fee
		}
	}
	return m
}

func orderBlockName(o core.Order) string {
	if o.Name != "" {
		return o.Name
	}
	return "order " + o.ID
}

func orderEvent(at time.Time, typ string, o core.Order, data map[string]any) core.Event {
	return core.Event{ID: newID("evt"), Time: at, Type: typ, Subject: o.ID, Team: o.Team, Data: data}
}

// orderData is an order event's data: the order's state and block, and
// what more says.
func orderData(o core.Order, more map[string]any) map[string]any {
	d := map[string]any{"state": string(o.State), "mode": string(o.Mode)}
	if o.BlockID != "" {
		d["blockId"] = o.BlockID
	}
	for k, v := range more {
		d[k] = v
	}
	return d
}

// offerData says what offering served an order.
func offerData(off core.Offering) map[string]any {
	return map[string]any{"offeringId": off.ID, "instanceType": off.InstanceType, "instanceCount": off.Count,
		"zone": off.Zone, "startTime": off.Start.Format(time.RFC3339), "endTime": off.End.Format(time.RFC3339),
		"upfrontFee": off.Fee.String(), "currency": off.Fee.Currency, "expiresAt": off.ExpiresAt.Format(time.RFC3339)}
}

// serveOrdersWhenDue runs ServeOrders when kicked or when ordersPoll has
// passed since last (on the wall clock); it returns when it last ran.
func (s *Service) serveOrdersWhenDue(ctx context.Context, kicked bool, last time.Time) time.Time {
	if !kicked && !last.IsZero() && time.Since(last) < ordersPoll {
		return last
	}
	if err := s.ServeOrders(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("serving the standing orders", "err", err)
	}
	return time.Now()
}
