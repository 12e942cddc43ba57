package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"capblock/internal/backend"
	"capblock/internal/clock"
	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/telemetry"
)

// The outbox worker makes decisions real on the engine. A decision that
// needs an engine step (a block becomes active, its workloads are stopped,
// it ends or is cancelled, its payment fails) stores the step as an action
// in its own commit (store.Change.Actions); the worker of the leading
// replica reads the due actions, applies each through the backend and
// records it done, or records the failure and tries again after a backoff
// that doubles, until a bound after which it gives up and an operator
// must look. Nothing calls the backend from a decision, so a crash or a
// change of leader between a commit and its engine step loses nothing:
// the next leader's worker finds the action pending and applies it.
//
// The store hands out only the oldest pending action of each subject, so
// a block's actions apply in the order they were decided; those of
// different blocks apply in parallel. When a worker dies after the
// backend took an action but before recording it, the next worker applies
// it again, which the backends take as a no-op (their calls are
// idempotent): each action takes effect once. FinishAction says whether
// this worker or another one recorded it.
//
// Engine calls are I/O with the real world: the actions' times, their
// backoff and bound follow the wall clock (OutboxOptions.Clock), even when
// the service runs on a simulated one, whose time moves only when an admin
// moves it.

// OutboxOptions tune the outbox worker; zero fields take the defaults.
type OutboxOptions struct {
	// Clock times the actions: when they are stored, due, retried, done
	// and pruned (the wall clock).
	Clock clock.Clock
	// FirstRetry is the wait after an action's first failed try (1s);
	// each further failure doubles it, up to MaxRetry (5m), each wait
	// jittered by Jitter.
	FirstRetry, MaxRetry time.Duration
	// Jitter spreads a wait, so that the actions that one outage failed
	// are not all retried at once; by default it moves it by up to a
	// fifth either way.
	Jitter func(time.Duration) time.Duration
	// GiveUpAfter is how long after it was stored an action that still
	// fails is given up on (24h): it fails, an operator must look, and
	// the next action of its block may run. MaxAttempts, when above 0,
	// gives up after that many failed tries too.
	GiveUpAfter time.Duration
	MaxAttempts int
	// Poll is how often the worker looks for due actions when nothing
	// wakes it (1s): retries fall due, and commits of other replicas
	// whose notice was missed.
	Poll time.Duration
	// CallTimeout bounds one backend call (30s); a call cut off fails
	// and is retried.
	CallTimeout time.Duration
	// Parallel is how many actions of different subjects run at once (8).
	Parallel int
	// Retention is how long a done action is kept for the blocks' status
	// (7 days); the worker prunes older ones every PruneEvery (1h), first
	// when it starts.
	Retention, PruneEvery time.Duration
}

func (o OutboxOptions) withDefaults() OutboxOptions {
	if o.Clock == nil {
		o.Clock = clock.Wall{}
	}
	if o.FirstRetry <= 0 {
		o.FirstRetry = time.Second
	}
	if o.MaxRetry <= 0 {
		o.MaxRetry = 5 * time.Minute
	}
	if o.Jitter == nil {
		o.Jitter = fifthJitter
	}
	if o.GiveUpAfter <= 0 {
		o.GiveUpAfter = 24 * time.Hour
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 30 * time.Second
	}
	if o.Parallel <= 0 {
		o.Parallel = 8
	}
	if o.Retention <= 0 {
		o.Retention = 7 * 24 * time.Hour
	}
	if o.PruneEvery <= 0 {
		o.PruneEvery = time.Hour
	}
	return o
}

// fifthJitter returns d moved by a random amount of up to d/5 either way.
func fifthJitter(d time.Duration) time.Duration {
	spread := int64(d / 5)
	if spread <= 0 {
		return d
	}
	return d - time.Duration(spread) + time.Duration(mathrand.Int64N(2*spread+1))
}

// backoff is the wait after an action's attempts-th failed try:
// FirstRetry doubled for each failure before it, at most MaxRetry,
// jittered.
func (o OutboxOptions) backoff(attempts int) time.Duration {
	d := o.FirstRetry
	for i := 1; i < attempts && d < o.MaxRetry; i++ {
		d *= 2
	}
	// At least a millisecond, so that an action retried is never due
	// again in the pass that failed it.
	return max(o.Jitter(min(d, o.MaxRetry)), time.Millisecond)
}

// giveUp reports whether an action that failed its attempts-th try at now
// is failed for good.
func (o OutboxOptions) giveUp(a core.Action, attempts int, now time.Time) bool {
	return (o.MaxAttempts > 0 && attempts >= o.MaxAttempts) || !now.Before(a.CreatedAt.Add(o.GiveUpAfter))
}

// outboxPage is how many due actions the worker reads at a time.
const outboxPage = 100

// recordTimeout bounds the recording of an action done once the worker
// was told to stop.
const recordTimeout = 5 * time.Second

// outboxRuntime is the worker's configuration, the channel that wakes it
// after a commit of this process stored actions, and the name under
// which this process holds the leader's lease (lease.go).
type outboxRuntime struct {
	opts   OutboxOptions
	kick   chan struct{}
	holder string
}

func newOutboxRuntime(opts OutboxOptions) outboxRuntime {
	return outboxRuntime{opts: opts.withDefaults(), kick: make(chan struct{}, 1), holder: newID("replica")}
}

// blockAction is the engine action of kind on block b, as a decision
// leaves it at version (the version its commit stores). Its id is derived
// from the block, the version and the kind, so that one decision never
// stores one step twice.
func (s *Service) blockAction(kind core.ActionKind, b core.Block, version int64) core.Action {
	now := s.outbox.opts.Clock.Now()
	b.Version = version // the engine records it, and refuses an older one (backend/converge.go)
	a := core.Action{ID: fmt.Sprintf("ac-%s-%d-%s", b.ID, version, kind), Kind: kind, Subject: b.ID, Team: b.Team,
		Payload: backend.EncodeBlock(b), NextAt: now, CreatedAt: now}
	if kind == core.ActionActivate {
		// The purchase's trace goes on to its activation; other actions
		// continue the trace of the decision that stores them.
		a.Trace = b.Trace
	}
	return a
}

// activation is the engine's actions for block b, active, as stored at
// version: activate it (again, which is idempotent: on new GPUs, or
// until a new end), then, when its workloads were told to stop already,
// terminate it again, so that the engine holds it as terminating there
// too.
func (s *Service) activation(b core.Block, version int64) []core.Action {
	acts := []core.Action{s.blockAction(core.ActionActivate, b, version)}
	if b.Terminating {
		acts = append(acts, s.blockAction(core.ActionTerminate, b, version))
	}
	return acts
}

// kickOutbox wakes the worker after a commit that stored actions; on a
// replica that does not lead, nobody listens and the kick is dropped.
func (s *Service) kickOutbox() {
	select {
	case s.outbox.kick <- struct{}{}:
	default:
	}
}

// startOutbox runs the outbox worker until the returned stop is called,
// which waits for it to end. Run starts it while this replica leads, so
// that one replica at a time applies actions. Without a backend nor a job
// runner there is nothing to apply them through: the actions wait for a
// server that has them.
//
// The worker claims and records actions under epoch, the epoch of the
// leader's lease that Run holds while this replica leads; when the store
// says the lease is lost, lose is called, which ends the lead.
func (s *Service) startOutbox(ctx context.Context, epoch int64, lose func()) (stop func()) {
	if s.backend == nil && s.jobs == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.runOutbox(ctx, epoch); errors.Is(err, store.ErrLeaseLost) {
			s.log.Warn("the outbox worker lost the leader's lease; the lead ends", "epoch", epoch, "err", err)
			lose()
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// runOutbox applies the due actions as they fall due, until ctx ends or
// the lease of epoch is lost, which it returns. It looks for them
// whenever an action it applied is recorded, a commit of this process
// stores some (a kick), another replica's does (the notice that follow
// passes on as a kick), or every Poll; it prunes the done actions hourly.
func (s *Service) runOutbox(ctx context.Context, epoch int64) error {
	w := &outboxWorker{svc: s, opts: s.outbox.opts, epoch: epoch}
	return w.loop(ctx, s.outbox.kick)
}

// outboxWorker claims and records actions under epoch, the epoch of the
// leader's lease that this replica holds: once a later term began, the
// store refuses its claims and records (store.ErrLeaseLost).
type outboxWorker struct {
	svc    *Service
	opts   OutboxOptions
	epoch  int64
	pruned time.Time // when it last pruned the done actions
}

// pass claims and applies the actions due now until none is due and none
// is in flight: an action done lets the next one of its block fall due,
// which is taken next. An action that waits (errWaiting) stays due, but
// is tried once a pass. It returns the first error of the store.
func (w *outboxWorker) pass(ctx context.Context) error { return w.loop(ctx, nil) }

// actionDone is the outcome of one action applied.
type actionDone struct {
	a   core.Action
	err error
}

// loop keeps up to Parallel actions in flight, of different subjects:
// the actions of one subject run in order, one at a time, and a call
// that hangs (until CallTimeout) holds up its subject only. Each time an
// action is recorded, it claims again. With kick nil it returns once
// nothing is due and nothing is in flight (a pass); otherwise it then
// waits for a kick or Poll, and returns only when ctx ends or the lease
// is lost. An action is tried once until the next kick or Poll, so that
// one that waits is not tried again at once.
func (w *outboxWorker) loop(ctx context.Context, kick <-chan struct{}) error {
	var (
		tried    = map[string]bool{} // actions tried since the last wake
		inflight = map[string]bool{} // subjects with an action in flight
		results  = make(chan actionDone)
		first    error // of the store, since the last wake
		claim    = true
	)
	for {
		lost := errors.Is(first, store.ErrLeaseLost)
		if lost || ctx.Err() != nil {
			claim = false // the actions in flight end, and nothing more starts
		}
		if claim && len(inflight) < w.opts.Parallel {
			claim = false
			due, err := w.svc.store.ClaimActions(ctx, w.epoch, w.opts.Clock.Now(), outboxPage)
			if err != nil {
				first = cmp.Or(first, err)
			}
			for _, a := range due {
				if len(inflight) >= w.opts.Parallel {
					break
				}
				if tried[a.ID] || inflight[a.Subject] {
					continue
				}
				tried[a.ID], inflight[a.Subject] = true, true
				go func() { results <- actionDone{a, w.apply(ctx, a)} }()
			}
		}
		if len(inflight) == 0 && !claim {
			// Idle: nothing in flight, nothing more to claim now.
			if kick == nil || lost {
				return cmp.Or(first, ctx.Err())
			}
			if first != nil && ctx.Err() == nil {
				w.svc.log.Error("applying engine actions", "err", first)
			}
			first = nil
			w.pruned = w.prune(ctx, w.pruned)
			select {
			case <-ctx.Done():
				return nil
			case <-kick:
			case <-time.After(w.opts.Poll):
			}
			clear(tried)
			claim = true
			continue
		}
		var poll <-chan time.Time // a pass waits for its actions only
		if kick != nil {
			poll = time.After(w.opts.Poll)
		}
		select {
		case r := <-results:
			delete(inflight, r.a.Subject)
			if r.err != nil {
				first = cmp.Or(first, r.err)
			}
			claim = true
		case <-kick: // nil in a pass: never ready
			claim = true
		case <-poll: // retries fall due while a call hangs
			clear(tried)
			claim = true
		}
	}
}

// apply takes one action through the backend and records the outcome:
// done; or a failure, retried after the backoff; or, past the bound or
// for an error that no retry mends, failed for good. A failure that the
// end of ctx caused (the worker stops) is not the engine's: the action is
// left as it was, for the next worker. An action the engine took is
// recorded done even then, so that a worker stopping does not make the
// next one repeat it.
func (w *outboxWorker) apply(ctx context.Context, a core.Action) (err error) {
	// The action continues the trace of the decision that stored it,
	// whichever replica decided it.
	ctx, end := traced(telemetry.Extract(ctx, a.Trace), "outbox.apply "+string(a.Kind), trace.SpanKindInternal,
		attribute.String("capblock.action", a.ID), attribute.String("capblock.action.kind", string(a.Kind)),
		attribute.String("capblock.action.subject", a.Subject), attribute.Int("capblock.action.attempts", a.Attempts))
	defer end(&err)
	log := w.svc.log.With("action", a.ID, "kind", a.Kind, "subject", a.Subject)
	callCtx, cancel := context.WithTimeout(ctx, w.opts.CallTimeout)
	err = w.svc.applyAction(callCtx, a)
	cancel()
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	now := w.opts.Clock.Now()
	if err == nil {
		recCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		defer cancel()
		changed, ferr := w.svc.store.FinishAction(recCtx, w.epoch, a.ID, now)
		switch {
		case ferr != nil:
			return fmt.Errorf("recording action %s done: %w", a.ID, ferr)
		case !changed:
			// Another worker recorded it, or it was failed meanwhile:
			// the backend took it again, which it does as a no-op.
			log.Info("engine action done, but another worker recorded it first")
		default:
			log.Debug("engine action done", "attempts", a.Attempts+1)
		}
		return nil
	}
	if wait := (errWaiting{}); errors.As(err, &wait) && !w.opts.giveUp(a, 0, now) {
		// Not a failure: due again at once, tried at the next pass (a
		// kick, or the poll), without an attempt counted.
		log.Debug("an engine action waits", "why", wait.why)
		if rerr := w.svc.store.RetryAction(ctx, w.epoch, a.ID, a.Attempts, now, wait.why); rerr != nil && !store.IsConflict(rerr) {
			return fmt.Errorf("recording that action %s waits: %w", a.ID, rerr)
		}
		return nil
	}
	attempts := a.Attempts + 1
	w.svc.metrics.actionFailures.WithLabelValues(string(a.Kind)).Inc()
	if errors.Is(err, backend.ErrPermanent) || w.opts.giveUp(a, attempts, now) {
		log.Error("giving up on an engine action; an operator must see to it", "attempts", attempts, "err", err)
		if ferr := w.svc.store.FailAction(ctx, w.epoch, a.ID, now, err.Error()); ferr != nil && !store.IsConflict(ferr) {
			return fmt.Errorf("recording action %s failed: %w", a.ID, ferr)
		}
		w.svc.instanceNeverStarted(ctx, a, err)
		return nil
	}
	next := now.Add(w.opts.backoff(attempts))
	log.Warn("an engine action failed; it is tried again", "attempts", attempts, "next", next, "err", err)
	if rerr := w.svc.store.RetryAction(ctx, w.epoch, a.ID, attempts, next, err.Error()); rerr != nil && !store.IsConflict(rerr) {
		return fmt.Errorf("recording a failed try of action %s: %w", a.ID, rerr)
	}
	return nil
}

// prune removes the done actions older than Retention, unless it last
// tried (at last, on the outbox clock) less than PruneEvery ago. It
// returns when it last tried: a failure is logged and tried again later,
// as the rows only cost space meanwhile.
func (w *outboxWorker) prune(ctx context.Context, last time.Time) time.Time {
	now := w.opts.Clock.Now()
	if !last.IsZero() && now.Sub(last) < w.opts.PruneEvery {
		return last
	}
	before := now.Add(-w.opts.Retention)
	n, err := w.svc.store.PruneActions(ctx, before)
	switch {
	case err != nil && ctx.Err() == nil:
		w.svc.log.Warn("pruning the done engine actions", "done before", before, "err", err)
	case err == nil:
		w.svc.log.Debug("pruned the done engine actions", "removed", n, "done before", before)
	}
	return now
}

// actionsCollector reports the stored actions that are pending and
// failed, and how long the most overdue one has waited, read from the
// store at each scrape: every replica reports the same numbers, those of
// the shared outbox.
type actionsCollector struct {
	svc                      *Service
	pending, failed, overdue *prometheus.Desc
}

func newActionsCollector(s *Service) actionsCollector {
	return actionsCollector{svc: s,
		pending: prometheus.NewDesc("capblock_engine_actions_pending",
			"Engine actions stored and not yet taken by the backend (due, or waiting for a retry or for an earlier action of their block).", nil, nil),
		failed: prometheus.NewDesc("capblock_engine_actions_failed",
			"Engine actions given up on after failing too long, or for an error no retry mends; an operator must look at each.", nil, nil),
		overdue: prometheus.NewDesc("capblock_engine_actions_overdue_seconds",
			"Seconds the most overdue pending engine action has been due and not done (0 when none is due; one waiting for a retry is due at its retry): "+
				"a worker that keeps up holds it near 0; it grows while no replica leads, the worker is stuck, or the backend does not answer.", nil, nil),
	}
}

func (c actionsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pending
	ch <- c.failed
	ch <- c.overdue
}

// Collect reads the counts, then the most overdue action (the first that
// DueActions orders: the earliest NextAt); when the store does not answer
// it reports none of the gauges it could not read (an absent series, not a
// false zero) and logs why.
func (c actionsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pending, failed, err := c.svc.store.ActionCounts(ctx)
	if err != nil {
		c.svc.log.Warn("counting the engine actions for the metrics", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(pending))
	ch <- prometheus.MustNewConstMetric(c.failed, prometheus.GaugeValue, float64(failed))
	now := c.svc.outbox.opts.Clock.Now()
	due, err := c.svc.store.DueActions(ctx, now, 1)
	if err != nil {
		c.svc.log.Warn("reading the most overdue engine action for the metrics", "err", err)
		return
	}
	overdue := 0.0
	if len(due) > 0 {
		overdue = max(now.Sub(due[0].NextAt).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(c.overdue, prometheus.GaugeValue, overdue)
}
