package service

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"capblock/internal/core"
)

// eventsPage is how many events one call returns at most.
const eventsPage = 500

// Events returns the team's events after a cursor (every team's for an
// admin, team ""), waiting up to wait for one to arrive. The cursor is the
// sequence number of the last event returned, so it moves only with the
// team's own events: the store filters by team, and neither the cursor nor
// the moment a long poll returns says anything of other teams' activity.
// With no event for the team, next is the cursor given.
func (s *Service) Events(ctx context.Context, team, after string, wait time.Duration) ([]core.Event, string, error) {
	var seq int64
	if after != "" {
		n, err := strconv.ParseInt(after, 10, 64)
		if err != nil || n < 0 {
			return nil, "", core.Invalidf("cursor %q is not one this server returned; pass the \"next\" of the previous answer", after)
		}
		seq = n
	}
	next := strconv.FormatInt(seq, 10)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		// Any team's commit wakes the wait; the read then finds nothing
		// new for this team and the poll waits on, until its deadline.
		changed := s.eventsChanged()
		evs, err := s.store.Events(ctx, team, seq, eventsPage)
		if err != nil {
			return nil, "", fmt.Errorf("reading events: %w", err)
		}
		if len(evs) > 0 {
			return evs, strconv.FormatInt(evs[len(evs)-1].Seq, 10), nil
		}
		if wait <= 0 {
			return []core.Event{}, next, nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return []core.Event{}, next, nil
		case <-ctx.Done():
			return []core.Event{}, next, nil
		}
	}
}
