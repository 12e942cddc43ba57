package simulate

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// Standing orders: a team asks for a block that may not fit yet; the
// leader (LeadOnce) serves the open orders on each pass, oldest first,
// notifying or buying (within the order's maxFee) once one fits. The
// checker reads each order its events name: its state is what they
// say, an acknowledged order is stored as answered, and a bought one's
// block is the order's request, at the fee of the offering that served
// it, within its maxFee, charged once.

// orderRec is an acknowledged standing order.
type orderRec struct {
	id, team, name string
	req            contract.OrderRequest
	// acked is the order as last answered or read by its client; the
	// store must hold it or a later version.
	acked core.Order
	// cancelled: a cancellation of it was acknowledged.
	cancelled bool
}

// orderLog is what the checker read of the orders: each one's state as
// its events tell it, the block and fee of each one bought, and each
// one as last read.
type orderLog struct {
	evState map[string]core.OrderState
	bought  map[string]orderBought
	stored  map[string]core.Order
	touched map[string]bool
}

// orderBought is what an order.bought event says: the block, and the
// fee of the offering that served the order.
type orderBought struct{ block, fee string }

func newOrderLog() *orderLog {
	return &orderLog{evState: map[string]core.OrderState{}, bought: map[string]orderBought{}, stored: map[string]core.Order{},
		touched: map[string]bool{}}
}

// isOrderID reports whether id names a standing order (ord-…).
func isOrderID(id string) bool { return strings.HasPrefix(id, "ord-") }

// event takes in one event about an order.
func (l *orderLog) event(e core.Event) {
	l.touched[e.Subject] = true
	if st, ok := e.Data["state"].(string); ok {
		l.evState[e.Subject] = core.OrderState(st)
	}
	if e.Type == core.EventOrderBought {
		id, _ := e.Data["blockId"].(string)
		fee, _ := e.Data["upfrontFee"].(string)
		l.bought[e.Subject] = orderBought{block: id, fee: fee}
	}
}

// opOrder places a standing order for a team, or, one time in three,
// cancels one that is open as last read.
func (w *world) opOrder() {
	if w.rng.IntN(3) == 0 {
		w.cancelOrder()
		return
	}
	t := w.pickTeam()
	p, scope := w.caller(t)
	typ, count := w.pickType()
	hours := w.hours()
	from, to := w.window(hours)
	w.m.tokens++
	req := contract.OrderRequest{Team: t.id, Name: fmt.Sprintf("o%d", w.m.tokens), Mode: core.OrderNotify, InstanceType: typ,
		Count: count, Duration: time.Duration(hours) * time.Hour, StartAfter: from, EndBefore: to}
	if w.rng.IntN(3) != 0 {
		// A buy order, within a maxFee of half to one and a half times
		// the on-demand price of its hours.
		it, _ := w.fleet.Type(typ)
		req.Mode = core.OrderBuy
		req.MaxFee = core.Money{Minor: it.OnDemand.Minor * int64(count*hours) * int64(50+w.rng.IntN(101)) / 100, Currency: "USD"}
	}
	if w.rng.IntN(2) == 0 {
		req.Deadline = w.now().Add(time.Duration(1+w.rng.IntN(12)) * time.Hour)
	}
	w.begin("order %s: %s for %s, %s %d×%s for %dh in [%s, %s) within %d", req.Name, p.User.Name, t.name, req.Mode, count, typ, hours,
		from.Format(time.RFC3339), to.Format(time.RFC3339), req.MaxFee.Minor)
	o, err := w.g.CreateOrder(w.as(p), req)
	switch {
	case err == nil:
		w.count("order/placed")
		w.note("placed %s", o.ID)
		if o.Team != t.id || o.InstanceType != typ || o.Count != count || o.Duration != req.Duration || o.Mode != req.Mode ||
			o.MaxFee.Minor != req.MaxFee.Minor || o.State != core.OrderOpen {
			w.fail("order %s is %s's %s %d×%s for %s within %d, %s; asked %s %d×%s for %s within %d", o.ID, w.teamName(o.Team), o.Mode,
				o.Count, o.InstanceType, o.Duration, o.MaxFee.Minor, o.State, req.Mode, count, typ, req.Duration, req.MaxFee.Minor)
		}
		w.ackOrder(o, req)
	case injected(err):
		// No client token: the client looks for its order by name.
		w.count("order/fault")
		w.note("fault: %v", err)
		orders, err := w.g.ListOrders(w.as(p), scope)
		w.must(err)
		for _, o := range orders {
			if o.Team == t.id && o.Name == req.Name {
				w.note("finds it stored as %s", o.ID)
				w.ackOrder(o, req)
			}
		}
	case errors.Is(err, core.ErrInvalidArgument), errors.Is(err, core.ErrQuotaExceeded), errors.Is(err, core.ErrNoCapacity),
		errors.Is(err, core.ErrInvalidState):
		w.count("order/refused/" + reason(err))
		w.note("refused: %v", err)
	default:
		w.must(err)
	}
}

// ackOrder records an order its client knows of.
func (w *world) ackOrder(o core.Order, req contract.OrderRequest) {
	r := &orderRec{id: o.ID, team: o.Team, name: o.Name, req: req, acked: o}
	w.m.orders = append(w.m.orders, r)
	w.m.orderAt[o.ID] = r
	w.chk.ord.touched[o.ID] = true
}

// cancelOrder withdraws an order that is open as last read; the leader
// may have served it meanwhile, which the refusal says and a read
// shows.
func (w *world) cancelOrder() {
	var r *orderRec
	for range 4 {
		if len(w.m.orders) == 0 {
			break
		}
		o := w.m.orders[w.rng.IntN(len(w.m.orders))]
		if w.chk.ord.stored[o.id].State == core.OrderOpen {
			r = o
			break
		}
	}
	if r == nil {
		w.begin("cancel order: none open")
		return
	}
	t := w.teamOf(r.team)
	caller, scope := w.caller(t)
	w.begin("cancel order %s of %s", r.id, t.name)
	o, err := w.g.CancelOrder(w.as(caller), scope, r.id)
	switch {
	case err == nil:
		w.count("cancelorder/done")
		if o.State != core.OrderCancelled {
			w.fail("order %s cancelled is %s", r.id, o.State)
		}
		r.acked, r.cancelled = o, true
	case injected(err):
		w.count("cancelorder/fault")
		w.note("fault: %v", err)
		w.readOrder(r, caller, scope)
	case errors.Is(err, core.ErrInvalidState):
		w.count("cancelorder/refused/" + reason(err))
		w.note("refused: %v", err)
		w.readOrder(r, caller, scope)
	default:
		w.must(err)
	}
	w.chk.ord.touched[r.id] = true
}

// readOrder reads an order as its client would after an answer it
// could not trust, and takes that as acknowledged.
func (w *world) readOrder(r *orderRec, caller core.Principal, scope string) {
	o, err := w.g.GetOrder(w.as(caller), scope, r.id)
	w.must(err)
	w.note("reads it %s", o.State)
	if o.Version >= r.acked.Version {
		r.acked = o
	}
}

// takeOrders reads the orders this step's events named, or that it
// acknowledged, and checks each.
func (w *world) takeOrders() {
	l := w.chk.ord
	for _, id := range slices.Sorted(maps.Keys(l.touched)) {
		o, err := w.st.Order(w.ctx, id)
		if err != nil {
			w.fail("reading order %s: %v", id, err)
		}
		w.checkOrder(o)
		if b, ok := l.bought[id]; ok && l.stored[id].State != core.OrderBought {
			w.checkOrderBlock(o, b)
		}
		l.stored[id] = o
	}
	clear(l.touched)
}

// checkOrder checks an order read from the store against its events and
// what its client was answered.
func (w *world) checkOrder(o core.Order) {
	l := w.chk.ord
	if st, ok := l.evState[o.ID]; !ok || st != o.State {
		w.fail("order %s is %s in the store; its events say %q", o.ID, o.State, st)
	}
	if old, ok := l.stored[o.ID]; ok && old.State != core.OrderOpen && old.State != o.State {
		w.fail("order %s was %s, which it never leaves; the store says %s", o.ID, old.State, o.State)
	}
	r := w.m.orderAt[o.ID]
	if r == nil {
		return // placed by an answer lost and never read
	}
	a := r.acked
	switch {
	case o.Version < a.Version:
		w.fail("order %s is stored at version %d, older than version %d acknowledged (%s)", o.ID, o.Version, a.Version, a.State)
	case o.Version == a.Version && o.State != a.State:
		w.fail("order %s at version %d is stored %s; it was acknowledged %s", o.ID, o.Version, o.State, a.State)
	case r.cancelled && o.State != core.OrderCancelled:
		w.fail("order %s was acknowledged cancelled; the store says %s", o.ID, o.State)
	case o.Team != r.team || o.InstanceType != r.req.InstanceType || o.Count != r.req.Count || o.Duration != r.req.Duration ||
		o.MaxFee.Minor != r.req.MaxFee.Minor || !o.StartAfter.Equal(r.req.StartAfter) || !o.EndBefore.Equal(r.req.EndBefore):
		w.fail("order %s is stored as %s's %d×%s for %s in [%s, %s) within %d; it was placed as %d×%s for %s in [%s, %s) within %d",
			o.ID, w.teamName(o.Team), o.Count, o.InstanceType, o.Duration, o.StartAfter.Format(time.RFC3339), o.EndBefore.Format(time.RFC3339),
			o.MaxFee.Minor, r.req.Count, r.req.InstanceType, r.req.Duration, r.req.StartAfter.Format(time.RFC3339),
			r.req.EndBefore.Format(time.RFC3339), r.req.MaxFee.Minor)
	}
}

// checkOrderBlock checks the block an order bought, read this step: the
// order's team, type, count, zone and duration, in its window, at the
// fee of the offering that served it (price honesty), within its
// maxFee. Charged once, at its fee: the checker's purchase checks.
func (w *world) checkOrderBlock(o core.Order, ev orderBought) {
	b, ok := w.chk.stored[ev.block]
	switch {
	case o.State != core.OrderBought || o.BlockID != ev.block:
		w.fail("order %s's event says it bought %s; the store says %s, block %q", o.ID, ev.block, o.State, o.BlockID)
	case !ok:
		w.fail("order %s bought block %s, which no event made", o.ID, ev.block)
	case !w.chk.evPurchased[b.ID]:
		w.fail("order %s bought block %s, which no block.purchased event tells of", o.ID, b.ID)
	case b.Team != o.Team || b.InstanceType != o.InstanceType || b.Count != o.Count || (o.Zone != "" && b.Zone != o.Zone) ||
		b.End.Sub(b.Start) != o.Duration || b.Start.Before(o.StartAfter) || b.End.After(o.EndBefore):
		w.fail("order %s (%s's %d×%s for %s in [%s, %s)) bought block %s: %s's %d×%s in %s over [%s, %s)", o.ID, w.teamName(o.Team),
			o.Count, o.InstanceType, o.Duration, o.StartAfter.Format(time.RFC3339), o.EndBefore.Format(time.RFC3339), b.ID,
			w.teamName(b.Team), b.Count, b.InstanceType, b.Zone, b.Start.Format(time.RFC3339), b.End.Format(time.RFC3339))
	case b.Fee.String() != ev.fee:
		w.fail("order %s bought block %s for %s; the offering that served it said %s", o.ID, b.ID, b.Fee, ev.fee)
	case b.Fee.Minor > o.MaxFee.Minor:
		w.fail("order %s bought block %s for %d, above its maxFee %d", o.ID, b.ID, b.Fee.Minor, o.MaxFee.Minor)
	}
	if o.Mode != core.OrderBuy {
		w.fail("order %s, a %s order, bought block %s", o.ID, o.Mode, b.ID)
	}
}

// checkOrdersStored reads every order: each as last read (a change of
// state with no event is not), and each acknowledged one stored.
func (w *world) checkOrdersStored() {
	all, err := w.st.ListOrders(w.ctx, "", "")
	if err != nil {
		w.fail("listing the orders: %v", err)
	}
	seen := make(map[string]bool, len(all))
	for _, o := range all {
		seen[o.ID] = true
		if old, ok := w.chk.ord.stored[o.ID]; !ok || old.State != o.State {
			w.fail("order %s is stored %s; as last read after its events it was %q", o.ID, o.State, old.State)
		}
		w.checkOrder(o)
	}
	for _, r := range w.m.orders {
		if !seen[r.id] {
			w.fail("order %s, acknowledged %s, is not stored", r.id, r.acked.State)
		}
	}
}
