package service

import "github.com/prometheus/client_golang/prometheus"

// serviceMetrics count what replicas do to stay consistent with each
// other: conflicts between their decisions and how each was settled.
// The engine actions' gauges are read from the store (actionsCollector),
// the fleet's from the index and the store (fleetCollector).
type serviceMetrics struct {
	conflicts prometheus.Counter
	catchUps  *prometheus.CounterVec
	watchLost prometheus.Counter
}

func newServiceMetrics() serviceMetrics {
	return serviceMetrics{
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
}

// Collectors returns the service's metrics, for /metrics.
func (s *Service) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.metrics.conflicts, s.metrics.catchUps, s.metrics.watchLost, newActionsCollector(s), newFleetCollector(s)}
}
