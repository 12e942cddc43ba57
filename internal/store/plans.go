package store

import (
	"context"
	"fmt"

	"capblock/internal/core"
)

// Plans reads the stored training plans; they are written by Commit
// (Change.InsertPlans), in the same transaction as their segment blocks.
type Plans interface {
	// Plan returns one plan with its segments (the blocks whose PlanID is
	// the plan's, ordered by start then id), or ErrNotFound.
	Plan(ctx context.Context, id string) (core.Plan, error)
	// ListPlans returns a team's plans ("" for every team's), oldest
	// first (by creation time, then id), each with its segments.
	ListPlans(ctx context.Context, team string) ([]core.Plan, error)
}

// ValidatePlan rejects a plan that no stored state could accept; drivers
// call it for each plan of Change.InsertPlans. The error wraps
// core.ErrInvalidArgument.
func ValidatePlan(p core.Plan) error {
	switch {
	case p.ID == "":
		return core.Invalidf("a plan needs an id")
	case p.Team == "":
		return fmt.Errorf("plan %s: %w", p.ID, core.Invalidf("a plan needs a team"))
	}
	return nil
}

// GroupSegments attaches blocks to the plans they are segments of, in the
// order given (drivers read them ordered by start then id).
func GroupSegments(plans []core.Plan, blocks []core.Block) {
	at := make(map[string]int, len(plans))
	for i, p := range plans {
		at[p.ID] = i
	}
	for _, b := range blocks {
		if i, ok := at[b.PlanID]; ok {
			plans[i].Segments = append(plans[i].Segments, b)
		}
	}
}
