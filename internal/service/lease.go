package service

import (
	"context"
	"errors"
	"time"

	"capblock/internal/store"
)

// The leader's lease, first cut. The reconciler's lead is still decided
// as before (always on a store of its own, Coordinator.TryLead on a
// shared one); within it, the outbox worker holds the store's lease
// (store.Leases) and claims and records actions under its epoch, so that
// a deposed leader's worker (a process paused while its connection
// stayed open) can record nothing once another term began. When the
// lease is lost, the lead ends. Moving the whole lead onto the lease is
// to come.

// leaseTTL is how long the lease lasts without a renewal; leaseRenew is
// how often its holder renews it, well within leaseTTL, so that a few
// slow or failed renewals in a row do not lose it.
const (
	leaseTTL   = 10 * time.Second
	leaseRenew = 2 * time.Second
)

// releaseTimeout bounds the release of the lease once its holder stops.
const releaseTimeout = 5 * time.Second

// holdLease acquires the leader's lease for this process, trying again
// every leadRetry while another replica holds it (until its lease
// expires, or it releases it), then renews it every leaseRenew until ctx
// ends or stop is called; stop waits for the renewals to end and
// releases the lease, so that another replica may lead at once. ok is
// false when ctx ended before the lease was acquired. When a renewal
// fails, the epoch may no longer be current: lost is called, and the
// renewals end.
func (s *Service) holdLease(ctx context.Context, lost func()) (epoch int64, stop func(), ok bool) {
	holder := s.outbox.holder
	for {
		l, ok, err := s.store.AcquireLease(ctx, holder, leaseTTL)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Error("acquiring the leader's lease", "err", err)
		case ok:
			epoch = l.Epoch
		case err == nil:
			s.log.Debug("another replica holds the leader's lease", "holder", l.Holder, "epoch", l.Epoch, "expires", l.Expires)
		}
		if epoch != 0 {
			break
		}
		select {
		case <-ctx.Done():
			return 0, nil, false
		case <-time.After(leadRetry):
		}
	}
	s.log.Info("this replica holds the leader's lease", "epoch", epoch)

	renewCtx, cancel := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(leaseRenew)
		defer t.Stop()
		for {
			select {
			case <-renewCtx.Done():
				return
			case <-t.C:
			}
			if _, err := s.store.RenewLease(renewCtx, holder, epoch, leaseTTL); err != nil {
				if renewCtx.Err() != nil {
					return
				}
				if errors.Is(err, store.ErrLeaseLost) {
					s.log.Warn("the leader's lease was lost", "epoch", epoch, "err", err)
				} else {
					s.log.Error("renewing the leader's lease; giving up the lead", "epoch", epoch, "err", err)
				}
				lost()
				return
			}
		}
	}()
	return epoch, func() {
		cancel()
		<-renewed
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer rcancel()
		if err := s.store.ReleaseLease(rctx, holder, epoch); err != nil {
			s.log.Warn("releasing the leader's lease; another replica takes over once it expires", "epoch", epoch, "err", err)
		}
	}, true
}
