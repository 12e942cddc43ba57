package core

import (
	"fmt"
	"time"
)

// OrderMode says what a standing order does once its request fits.
type OrderMode string

const (
	OrderNotify OrderMode = "notify" // record order.fits, with a quote
	OrderBuy    OrderMode = "buy"    // buy the block, within MaxFee
)

// OrderState is a standing order's state.
type OrderState string

const (
	OrderOpen      OrderState = "open"      // waiting for capacity
	OrderNotified  OrderState = "notified"  // it fitted and was notified
	OrderBought    OrderState = "bought"    // its block was bought
	OrderExpired   OrderState = "expired"   // the deadline passed first
	OrderCancelled OrderState = "cancelled" // its team withdrew it
)

// Order event types.
const (
	EventOrderCreated   = "order.created"
	EventOrderFits      = "order.fits"
	EventOrderBought    = "order.bought"
	EventOrderExpired   = "order.expired"
	EventOrderCancelled = "order.cancelled"
)

// Order is a standing request for a block that does not fit yet: Count
// instances of InstanceType (in Zone, any when empty) for Duration,
// starting at or after StartAfter and ending by EndBefore. Open orders
// are served first come, first served (by CreatedAt, then ID) each time
// capacity frees and on a periodic pass, until Deadline.
type Order struct {
	ID           string
	Name         string
	Team         string
	Mode         OrderMode
	InstanceType string
	Count        int
	Zone         string
	Duration     time.Duration
	StartAfter   time.Time
	EndBefore    time.Time
	Deadline     time.Time
	// MaxFee bounds the upfront fee an automatic purchase pays; a zero
	// amount (notify mode) does not bound it.
	MaxFee    Money
	State     OrderState
	BlockID   string // the block bought
	Reason    string // why it has not been served yet, last seen
	CreatedAt time.Time
	UpdatedAt time.Time
	Version   int64
}

// ValidOrderState reports whether s is a known state.
func ValidOrderState(s OrderState) bool {
	switch s {
	case OrderOpen, OrderNotified, OrderBought, OrderExpired, OrderCancelled:
		return true
	}
	return false
}

// CancelOrder withdraws an open order.
func CancelOrder(o Order, now time.Time) (Order, error) {
	if o.State != OrderOpen {
		return o, fmt.Errorf("%w: order %s is %s; only an open order can be cancelled", ErrInvalidState, o.ID, o.State)
	}
	o.State, o.UpdatedAt = OrderCancelled, now
	return o, nil
}

// LatestStart is the last start at which the order's block still ends
// by EndBefore.
func (o Order) LatestStart() time.Time { return o.EndBefore.Add(-o.Duration) }
