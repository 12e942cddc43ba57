package service

import (
	"context"
	"errors"
	"sync"
	"time"

	"capblock/internal/store"
)

// The leader's lease. A replica leads (reconciles, applies the engine
// actions, runs the jobs, serves the standing orders) only while it holds
// the store's lease (store.Leases), whose epoch grows with each term: the
// outbox claims and records actions under it, so that whatever a deposed
// leader tries to record once a later term began is refused.
//
// The lease lasts leaseTTL from the store's clock at each renewal. Its
// holder renews it every leaseRenew and counts it valid only until
// leaseTTL less leaseMargin after it sent the last renewal that
// succeeded, by its own clock: past that it stops leading, before the
// store can grant the lease to another replica. A leader that dies
// without releasing the lease is replaced within about leaseTTL.

const (
	leaseTTL    = 6 * time.Second
	leaseRenew  = time.Second
	leaseMargin = 2 * time.Second
)

// releaseTimeout bounds the release of the lease once its holder stops.
const releaseTimeout = 5 * time.Second

// leaseHolder is who this replica is to the lease: a random id per
// process on a store that several replicas share; on a store of its own,
// one fixed name, so that a server restarted after a crash takes its
// lease back at once instead of waiting for it to expire.
func (s *Service) leaseHolder() string {
	if s.sharesStore() {
		return s.outbox.holder
	}
	return "the-only-server"
}

// holdLease acquires the leader's lease, trying again every leadRetry
// while another replica holds it, then renews it every leaseRenew until
// ctx ends or stop is called; stop waits for the renewals to end and
// releases the lease, so that another replica may lead at once. ok is
// false when ctx ended before the lease was acquired. When the lease may
// no longer be this replica's (a renewal refused, or none succeeded for
// leaseTTL less leaseMargin), lose is called and the renewals end.
func (s *Service) holdLease(ctx context.Context, lose func()) (epoch int64, stop func(), ok bool) {
	holder := s.leaseHolder()
	var sent time.Time
	for epoch == 0 {
		sent = time.Now()
		l, ok, err := s.store.AcquireLease(ctx, holder, leaseTTL)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Error("acquiring the leader's lease", "err", err)
		case ok:
			epoch = l.Epoch
			continue
		case err == nil:
			s.log.Debug("another replica holds the leader's lease", "holder", l.Holder, "epoch", l.Epoch, "expires", l.Expires)
		}
		select {
		case <-ctx.Done():
			return 0, nil, false
		case <-time.After(leadRetry):
		}
	}
	// The watchdog ends the lead when the lease may have passed on, even
	// while a renewal hangs.
	var mu sync.Mutex
	watchdog := time.AfterFunc(time.Until(sent.Add(leaseTTL-leaseMargin)), func() {
		s.log.Warn("the leader's lease was not renewed in time; the lead ends", "epoch", epoch)
		lose()
	})
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
			sent := time.Now()
			callCtx, callCancel := context.WithTimeout(renewCtx, leaseRenew)
			_, err := s.store.RenewLease(callCtx, holder, epoch, leaseTTL)
			callCancel()
			switch {
			case renewCtx.Err() != nil:
				return
			case errors.Is(err, store.ErrLeaseLost):
				s.log.Warn("the leader's lease was lost", "epoch", epoch, "err", err)
				lose()
				return
			case err != nil:
				s.log.Warn("renewing the leader's lease; trying again", "epoch", epoch, "err", err)
			default:
				mu.Lock()
				watchdog.Reset(time.Until(sent.Add(leaseTTL - leaseMargin)))
				mu.Unlock()
			}
		}
	}()
	return epoch, func() {
		cancel()
		<-renewed
		mu.Lock()
		watchdog.Stop()
		mu.Unlock()
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer rcancel()
		if err := s.store.ReleaseLease(rctx, holder, epoch); err != nil {
			s.log.Warn("releasing the leader's lease; another replica takes over once it expires", "epoch", epoch, "err", err)
		}
	}, true
}
