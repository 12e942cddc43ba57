package service

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"capblock/internal/core"
)

// serviceMetrics count the purchases and how each ended, the engine
// actions' failed tries on this replica's outbox worker, and what
// replicas do to stay consistent with each other: conflicts between their
// decisions and how each was settled.
// The engine actions' gauges are read from the store (actionsCollector),
// the fleet's from the index and the store (fleetCollector).
type serviceMetrics struct {
	purchases      *prometheus.CounterVec
	actionFailures *prometheus.CounterVec
	conflicts      prometheus.Counter
	catchUps       *prometheus.CounterVec
	watchLost      prometheus.Counter
}

func newServiceMetrics() serviceMetrics {
	m := serviceMetrics{
		purchases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capblock_purchases_total",
			Help: "Purchases asked of this replica, from every front end, by kind (block, plan, series) and outcome: bought, replayed (a retry of a client token that had bought), or the reason it was refused, the API's problem code (no_capacity, budget_exceeded, quota_exceeded, offering_expired, …; internal: the store or the server failed).",
		}, []string{"kind", "outcome"}),
		actionFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capblock_engine_action_failures_total",
			Help: "Tries of engine actions that failed on this replica's outbox worker (it runs while the replica leads), by kind: each is retried after a backoff, or given up on.",
		}, []string{"kind"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capblock_purchase_conflicts_total",
			Help: "Purchases (blocks and plans) whose commit conflicted with another commit and that were decided again.",
		}),
		catchUps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capblock_index_catchups_total",
			Help: "Times the index caught up after a conflict: via a barrier through the watch, or a rebuild from the database.",
		}, []string{"via"}),
		watchLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capblock_watch_lost_total",
			Help: "Times the watch of other replicas' commits started listening, when the replica started or after its connection broke, and the index was rebuilt from the database.",
		}),
	}
	// Every kind's series is there from the start, at 0, so that a
	// rate over it is 0 (not absent) until a try fails.
	for _, k := range []core.ActionKind{core.ActionReserve, core.ActionActivate, core.ActionTerminate, core.ActionRelease,
		core.ActionStartInstance, core.ActionStopInstance} {
		m.actionFailures.WithLabelValues(string(k))
	}
	return m
}

// Collectors returns the service's metrics, for /metrics.
func (s *Service) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.metrics.purchases, s.metrics.actionFailures, s.metrics.conflicts, s.metrics.catchUps, s.metrics.watchLost, newActionsCollector(s), newFleetCollector(s)}
}

// purchaseKind is the kind label of a purchase that buyOnce names what.
func purchaseKind(what string) string {
	switch what {
	case "purchase":
		return "block"
	case "plan purchase":
		return "plan"
	case "series purchase":
		return "series"
	}
	return "other"
}

// refusals are the reasons a purchase is refused, most specific first,
// named as the API's problem codes name them.
var refusals = []struct {
	err    error
	reason string
}{
	{core.ErrOfferingExpired, "offering_expired"},
	{core.ErrOfferingInvalid, "offering_invalid"},
	{core.ErrIdempotencyMismatch, "idempotency_mismatch"},
	{core.ErrOfferingUsed, "offering_used"},
	{core.ErrNoCapacity, "no_capacity"},
	{core.ErrInvalidState, "invalid_state"},
	{core.ErrQuotaExceeded, "quota_exceeded"},
	{core.ErrBudgetExceeded, "budget_exceeded"},
	{core.ErrUnauthenticated, "unauthenticated"},
	{core.ErrForbidden, "forbidden"},
	{core.ErrRateLimited, "rate_limited"},
	{core.ErrNotFound, "not_found"},
	{core.ErrConflict, "conflict"},
	{core.ErrInvalidArgument, "invalid_argument"},
	{context.Canceled, "canceled"},
	{context.DeadlineExceeded, "canceled"},
}

// purchaseOutcome is the outcome label of a purchase that ended with
// created and err: anything but a domain refusal or a caller gone is
// internal.
func purchaseOutcome(created bool, err error) string {
	switch {
	case err == nil && created:
		return "bought"
	case err == nil:
		return "replayed"
	}
	for _, r := range refusals {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return "internal"
}
