package service

import (
	"context"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"time"

	"capblock/internal/core"
	"capblock/internal/store"
)

// buyOnce runs a purchase made under a client token (a block or a plan):
// buy decides and commits it; when it fails, a retry of an earlier
// purchase with the same token answers with what that one bought (load
// reads it), whatever stands in the way of buying again (an expired quote,
// capacity it took itself, its own idempotency record); the same token
// with another request is refused; a conflict with the stored state is
// retried on a fresh snapshot, a bounded number of times. Looking the
// token up only on failure keeps a read off every first purchase's path.
//
// A purchase refused for want of capacity by a replica on a shared store
// is decided again once the replica has caught up with every commit
// that ended before (catchUp): another replica may have freed the
// capacity a moment ago, and a refusal must hold against every commit
// acknowledged before it was asked.
//
// Each call counts once in capblock_purchases_total, by what it bought
// and how it ended (purchaseOutcome).
func buyOnce[T any](ctx context.Context, s *Service, team, token, hash, what string,
	buy func() (T, error), load func(subject string) (T, error)) (_ T, created bool, err error) {
	defer func() { s.metrics.purchases.WithLabelValues(purchaseKind(what), purchaseOutcome(created, err)).Inc() }()
	var zero T
	if token == "" {
		return zero, false, core.Invalidf("clientToken is required: pass a unique string per purchase so a retry cannot buy twice")
	}
	caughtUp := false
	for attempt := 1; ; attempt++ {
		v, err := buy()
		if err == nil {
			return v, true, nil
		}
		subject, found, rerr := s.tokenSubject(ctx, team, token, hash)
		if rerr != nil {
			return zero, false, rerr
		}
		if found {
			v, err := load(subject)
			if err != nil {
				return zero, false, fmt.Errorf("loading %s of client token %q: %w", subject, token, err)
			}
			return v, false, nil
		}
		if errors.Is(err, core.ErrNoCapacity) && !caughtUp && s.sharesStore() {
			caughtUp = true
			if err := s.catchUp(ctx); err != nil {
				return zero, false, err
			}
			attempt--
			continue
		}
		if !store.IsConflict(err) {
			return zero, false, err
		}
		if attempt == maxCommitAttempts {
			s.log.Warn(what+" kept conflicting with stored state", "attempts", attempt, "err", err)
			return zero, false, fmt.Errorf("%w: %s lost to concurrent purchases %d times in a row; retry with the same clientToken", core.ErrConflict, what, attempt)
		}
		s.metrics.conflicts.Inc()
		s.log.Warn(what+" conflicted with stored state; retrying once the index has caught up", "attempt", attempt, "err", err)
		if err := s.catchUp(ctx); err != nil {
			return zero, false, err
		}
		caughtUp = true
		// Purchases that collide again and again decide at the same
		// moments on the last free GPUs: a random pause, doubling with the
		// attempts up to 100 ms, sets them apart, until one wins or the
		// capacity is gone (no_capacity).
		if attempt > 1 {
			if !sleepCtx(ctx, time.Duration(mathrand.Int64N(int64(conflictPause(attempt))))) {
				return zero, false, ctx.Err()
			}
		}
	}
}

// conflictPause is the longest pause before the attempt after attempt.
func conflictPause(attempt int) time.Duration {
	return min(time.Millisecond<<min(attempt, 8), 100*time.Millisecond)
}

// tokenSubject returns what a client token already bought, if anything;
// the token with another request's hash is ErrIdempotencyMismatch.
func (s *Service) tokenSubject(ctx context.Context, team, token, hash string) (string, bool, error) {
	rec, err := s.store.Idempotency(ctx, team, token)
	if errors.Is(err, store.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("looking up client token: %w", err)
	}
	if rec.RequestHash != hash {
		return "", false, fmt.Errorf("%w: client token %q was used for %s with other parameters; use a new token for a new purchase", core.ErrIdempotencyMismatch, token, rec.Subject)
	}
	return rec.Subject, true, nil
}
