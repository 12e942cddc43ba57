package service

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"capblock/internal/core"
)

// fleetCollector reports, at each scrape, what the fleet is doing: from
// the index, under the shared lock, the live blocks by state and each
// pool's GPUs booked, free and unhealthy in the current hour; from the
// store, the running jobs, the webhook deliveries that failed and each
// team's GPU-hours reserved, used, lent and idle (Utilisation). The
// index is this replica's (the same on every replica once it caught up);
// the store's counts are the same on every replica.
type fleetCollector struct {
	svc *Service

	blocks                                    *prometheus.Desc
	gpus, gpusBooked, gpusFree, gpusUnhealthy *prometheus.Desc
	gpusUnhealthyBooked                       *prometheus.Desc
	jobsRunning                               *prometheus.Desc
	deliveriesFailing, deliveriesFailed       *prometheus.Desc
	gpuHours                                  *prometheus.Desc
}

func newFleetCollector(s *Service) fleetCollector {
	pool := []string{"gpu_model", "zone"}
	return fleetCollector{svc: s,
		blocks: prometheus.NewDesc("capblock_blocks",
			"Live capacity blocks (those holding capacity: payment-pending, scheduled, active) by state.", []string{"state"}, nil),
		gpus: prometheus.NewDesc("capblock_pool_gpus",
			"GPUs of the fleet's nodes, per GPU model and zone.", pool, nil),
		gpusBooked: prometheus.NewDesc("capblock_pool_gpus_booked",
			"GPUs held by live blocks in the current hour, per GPU model and zone (those of unhealthy nodes included).", pool, nil),
		gpusFree: prometheus.NewDesc("capblock_pool_gpus_free",
			"GPUs of healthy nodes that no block holds in the current hour, per GPU model and zone.", pool, nil),
		gpusUnhealthy: prometheus.NewDesc("capblock_pool_gpus_unhealthy",
			"GPUs of unhealthy nodes, booked or not, per GPU model and zone.", pool, nil),
		gpusUnhealthyBooked: prometheus.NewDesc("capblock_pool_gpus_unhealthy_booked",
			"GPUs of unhealthy nodes that live blocks hold in the current hour (no free node replaced them), per GPU model and zone.", pool, nil),
		jobsRunning: prometheus.NewDesc("capblock_jobs_running",
			"Jobs whose instances run now.", nil, nil),
		deliveriesFailing: prometheus.NewDesc("capblock_webhook_deliveries_failing",
			"Webhook deliveries not yet made whose last attempt failed, waiting to be tried again.", nil, nil),
		deliveriesFailed: prometheus.NewDesc("capblock_webhook_deliveries_failed",
			"Webhook deliveries given up on after their last attempt failed, still in the delivery logs.", nil, nil),
		gpuHours: prometheus.NewDesc("capblock_gpu_hours",
			"GPU-hours of the team's blocks so far, by kind: reserved (over the hours elapsed), used by its jobs, lent to backfill, idle.",
			[]string{"team", "kind"}, nil),
	}
}

func (c fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.blocks, c.gpus, c.gpusBooked, c.gpusFree, c.gpusUnhealthy,
		c.gpusUnhealthyBooked, c.jobsRunning, c.deliveriesFailing, c.deliveriesFailed, c.gpuHours} {
		ch <- d
	}
}

// Collect reports the index's gauges always, and the store's only when
// the store answers (an absent series, not a false zero), logging why not.
func (c fleetCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.svc
	// 1. The index, under the shared lock: pool summaries, no node walk.
	s.mu.RLock()
	pools, blocks := s.index.FleetStats(s.clock.Now())
	s.mu.RUnlock()
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	for _, st := range []core.BlockState{core.StatePaymentPending, core.StateScheduled, core.StateActive} {
		gauge(c.blocks, blocks[st], string(st))
	}
	for _, p := range pools {
		gauge(c.gpus, p.GPUs, p.GPUModel, p.Zone)
		gauge(c.gpusBooked, p.Booked, p.GPUModel, p.Zone)
		gauge(c.gpusFree, p.Free, p.GPUModel, p.Zone)
		gauge(c.gpusUnhealthy, p.Unhealthy, p.GPUModel, p.Zone)
		gauge(c.gpusUnhealthyBooked, p.UnhealthyBooked, p.GPUModel, p.Zone)
	}
	// 2. The store.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if n, err := c.runningJobs(ctx); err != nil {
		s.log.Warn("counting the running jobs for the metrics", "err", err)
	} else {
		gauge(c.jobsRunning, n)
	}
	if failing, failed, err := c.failedDeliveries(ctx); err != nil {
		s.log.Warn("counting the failed webhook deliveries for the metrics", "err", err)
	} else {
		gauge(c.deliveriesFailing, failing)
		gauge(c.deliveriesFailed, failed)
	}
	// Utilisation per team: labels bounded by the teams and four kinds.
	if rep, err := s.Utilisation(ctx, "", "", time.Time{}, time.Time{}); err != nil {
		s.log.Warn("computing the utilisation for the metrics", "err", err)
	} else {
		for _, t := range rep.Teams {
			for kind, v := range map[string]float64{"reserved": t.GPUHours.Reserved, "used": t.GPUHours.Used,
				"lent": t.GPUHours.Lent, "idle": t.GPUHours.Idle} {
				ch <- prometheus.MustNewConstMetric(c.gpuHours, prometheus.GaugeValue, v, t.Team, kind)
			}
		}
	}
}

func (c fleetCollector) runningJobs(ctx context.Context) (int, error) {
	jobs, err := c.svc.store.ListJobs(ctx, "", true)
	if err != nil {
		return 0, fmt.Errorf("listing the open jobs: %w", err)
	}
	n := 0
	for _, j := range jobs {
		if j.State == core.JobRunning {
			n++
		}
	}
	return n, nil
}

// failedDeliveries counts the deliveries still to make whose last attempt
// failed (one read), and those given up on, read from each webhook's
// delivery log, which the webhook worker prunes to its retention.
func (c fleetCollector) failedDeliveries(ctx context.Context) (failing, failed int, err error) {
	pending, err := c.svc.store.PendingDeliveries(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("reading the pending webhook deliveries: %w", err)
	}
	for _, d := range pending {
		if d.Error != "" {
			failing++
		}
	}
	hooks, err := c.svc.store.ListWebhooks(ctx, "")
	if err != nil {
		return 0, 0, fmt.Errorf("listing the webhooks: %w", err)
	}
	for _, h := range hooks {
		lines, err := c.svc.store.Deliveries(ctx, h.ID, 0)
		if err != nil {
			return 0, 0, fmt.Errorf("reading the deliveries of webhook %s: %w", h.ID, err)
		}
		for _, d := range lines {
			if d.Done && d.Error != "" {
				failed++
			}
		}
	}
	return failing, failed, nil
}
