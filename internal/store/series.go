package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"capblock/internal/core"
)

// SeriesOrders reads the stored series and standing orders; Commit writes
// them (Change.InsertSeries, InsertOrders, UpdateOrders).
type SeriesOrders interface {
	// Series returns one series with its occurrences (its blocks ordered
	// by start then id), or ErrNotFound.
	Series(ctx context.Context, id string) (core.Series, error)
	// ListSeries returns a team's series ("" for every team's), oldest
	// first (by creation time, then id), each with its occurrences.
	ListSeries(ctx context.Context, team string) ([]core.Series, error)
	// Order returns one standing order, or ErrNotFound.
	Order(ctx context.Context, id string) (core.Order, error)
	// ListOrders returns the orders of a team ("" for every team's) in
	// state (every state when ""), oldest first: by creation time, then
	// id, the order in which open orders are served.
	ListOrders(ctx context.Context, team string, state core.OrderState) ([]core.Order, error)
}

// OrderUpdate replaces a stored order's mutable fields (State, BlockID,
// Reason, UpdatedAt) if its Version is ExpectedVersion; otherwise Commit
// stores nothing and returns a conflict.
type OrderUpdate struct {
	Order           core.Order
	ExpectedVersion int64
}

// ValidateSeries rejects a series that no stored state could accept;
// drivers call it for each series of Change.InsertSeries. The error wraps
// core.ErrInvalidArgument.
func ValidateSeries(s core.Series) error {
	switch {
	case s.ID == "":
		return core.Invalidf("a series needs an id")
	case s.Team == "":
		return fmt.Errorf("series %s: %w", s.ID, core.Invalidf("a series needs a team"))
	case len(s.Occurrences) == 0:
		return fmt.Errorf("series %s: %w", s.ID, core.Invalidf("a series needs an occurrence"))
	}
	return nil
}

// ValidateOrder rejects an order that no stored state could accept.
func ValidateOrder(o core.Order) error {
	switch {
	case o.ID == "":
		return core.Invalidf("an order needs an id")
	case o.Team == "":
		return fmt.Errorf("order %s: %w", o.ID, core.Invalidf("an order needs a team"))
	case !core.ValidOrderState(o.State):
		return fmt.Errorf("order %s: %w", o.ID, core.Invalidf("unknown state %q", o.State))
	}
	return nil
}

// EncodeDays stores days of the week as their names, "mon,tue".
func EncodeDays(days []time.Weekday) string { return strings.Join(core.DayNames(days), ",") }

// DecodeDays reads what EncodeDays wrote.
func DecodeDays(s string) []time.Weekday {
	if s == "" {
		return nil
	}
	days, err := core.ParseDays(strings.Split(s, ","))
	if err != nil {
		return nil
	}
	return days
}

// GroupOccurrences attaches blocks to the series they are occurrences
// of, by the (series id, block id) pairs of members, in the order the
// blocks are given.
func GroupOccurrences(series []core.Series, members map[string]string, blocks []core.Block) {
	at := make(map[string]int, len(series))
	for i, s := range series {
		at[s.ID] = i
	}
	for _, b := range blocks {
		if i, ok := at[members[b.ID]]; ok {
			series[i].Occurrences = append(series[i].Occurrences, b)
		}
	}
}
