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

// Events returns the team's events after a cursor, waiting up to wait for
// one to arrive. The cursor is the last event's sequence number.
func (s *Service) Events(ctx context.Context, team, after string, wait time.Duration) ([]core.Event, string, error) {
	var seq int64
	if after != "" {
		n, err := strconv.ParseInt(after, 10, 64)
		if err != nil || n < 0 {
			return nil, "", core.Invalidf("cursor %q is not one this server returned; pass the \"next\" of the previous answer", after)
		}
		seq = n
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		changed := s.eventsChanged()
		evs, err := s.store.Events(ctx, seq, eventsPage)
		if err != nil {
			return nil, "", fmt.Errorf("reading events: %w", err)
		}
		out := make([]core.Event, 0, len(evs))
		for _, e := range evs {
			seq = e.Seq
			if team == "" || e.Team == team {
				out = append(out, e)
			}
		}
		next := strconv.FormatInt(seq, 10)
		if len(out) > 0 || wait <= 0 {
			return out, next, nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return out, next, nil
		case <-ctx.Done():
			return out, next, nil
		}
	}
}
