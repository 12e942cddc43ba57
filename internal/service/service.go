// Package service holds capblock's use cases: search, purchase, cancel,
// extend and the lifecycle reconciler. Each use case lets the core decide
// on the availability index under the service's lock and takes the
// decision as assumed there; it commits the decision without the lock, in
// one store transaction that re-checks it, with the engine actions it
// causes; then the index confirms the decision, or forgets it when the
// commit failed. The outbox worker applies the actions through the
// backend:
//
//	front end (api) → service → core (decide) → store (commit) → outbox worker → backend (act)
//
// It implements contract.Service, the use cases' contract, and imports no
// front end: the front ends import the contract.
package service

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"capblock/internal/backend"
	"capblock/internal/clock"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/seal"
	"capblock/internal/store"
)

// maxCommitAttempts bounds the retries of a decision whose commit found
// the stored state changed under it (another replica committed first).
// With the pauses between them (see buyOnce) they span about 1.5 s.
const maxCommitAttempts = 20

// Config is what a Service is built from.
type Config struct {
	Fleet   core.Fleet
	Store   store.Full
	Backend backend.Backend
	Clock   clock.Clock
	Log     *slog.Logger
	// Workloads runs the jobs' instances and reads their logs; nil runs
	// them as processes of this machine in JobsDir
	// (local.NewWorkloads).
	Workloads backend.Workloads
	// JobsDir holds the local jobs' logs, working and checkpoint
	// directories and the executor's state; empty, with no Workloads,
	// means this server runs no jobs.
	JobsDir string
	// JobUIDs are the users that teams' jobs run as, each team's its own,
	// in cgroups of their own; the zero range runs them as the server's
	// user (unisolated), in cgroups where the machine allows.
	JobUIDs UIDRange
	// JobUIDRegistry is where the servers of this machine claim their
	// ranges of job users (claimUIDRange); empty is DefaultUIDRegistry.
	JobUIDRegistry string
	// JobLimits bound each instance of a job; the service adds each
	// instance's Deadline and StopGrace (jobdeadline.go).
	JobLimits backend.Limits
	// JobsOff says why this server runs no jobs, when JobsDir is empty
	// on purpose; CreateJob answers with it.
	JobsOff string
	// AllowPrivateWebhooks lets webhooks deliver to loopback, private and
	// link-local addresses (a receiver inside the operator's network);
	// by default they reach public addresses only.
	AllowPrivateWebhooks bool
	// WebhookLogRetention is how long the delivery log keeps a finished
	// delivery; 0 keeps it 30 days.
	WebhookLogRetention time.Duration
	// Outbox tunes the worker that applies the engine actions through
	// Backend; the zero value takes its defaults.
	Outbox OutboxOptions
	// EnginePoll is how often the leader reads the backend's nodes and
	// their health (enginewatch.go); 0 is every 10 s.
	EnginePoll time.Duration
	// SecretsKey seals the secrets of access keys and webhooks, and the
	// offering signing secret. It is kept outside the database
	// (seal.LoadOrCreate), and replicas share it. Without one, the server
	// makes no access keys and accepts none, and stores webhooks' secrets
	// and a new signing secret in clear (webhooksecrets.go,
	// signingsecret.go); it refuses to start on a database whose signing
	// secret is sealed.
	SecretsKey *seal.Key
}

// Service implements the use cases. It is safe for concurrent use: reads
// of the index take mu shared, decisions take it exclusively to decide
// and assume, and again to confirm or forget; a commit runs without it,
// and so does every other call of the store (indexLock).
type Service struct {
	fleet   core.Fleet
	store   store.Full
	backend backend.Backend
	clock   clock.Clock
	log     *slog.Logger
	secret  []byte
	// secretsKey seals the access keys' secrets; nil when there is none.
	secretsKey *seal.Key

	mu    indexLock
	index *core.Index
	// settled is broadcast, under mu, each time a decision in flight on
	// the index is confirmed or forgotten (see decideLocked).
	settled *sync.Cond
	// health is the stored node health as this replica knows it, by
	// node; the index holds each node's health as recorded here (a node
	// never recorded is healthy). healthGen counts this replica's
	// commits of health, so that a reload read before one is dropped.
	health    map[string]core.NodeHealth
	healthGen uint64
	// gone are the versions at which blocks left the index, lately
	// (indexversions.go).
	gone map[string]goneVersion

	// leading is set while this replica runs the reconciler.
	leading atomic.Bool
	// probe watches that the index's lock is taken and let go (stuck.go).
	probe lockProbe

	// following is set while follow applies the other replicas' commits;
	// barriers are the catch-ups waiting for it to pass their token.
	following atomic.Bool
	barrierMu sync.Mutex
	barriers  map[string]chan bool

	// accounts caches tokens, quotas and budgets for requests.
	accounts accountCache

	allowPrivateWebhooks bool
	webhookLogRetention  time.Duration

	metrics serviceMetrics

	outbox     outboxRuntime // the engine actions' worker, run while leading
	enginePoll time.Duration // how often the leader reads the engine's nodes
	ordersKick chan struct{} // wakes the leader to serve the standing orders

	jobs    *jobRuntime // nil when the server runs no jobs
	jobsOff string      // why, when it was told

	// events is closed and replaced whenever events are committed, waking
	// long polls.
	eventsMu sync.Mutex
	events   chan struct{}
}

// New takes the fleet's nodes from the backend's inventory (see
// inventoryNodes), loads the live blocks from the store, builds the
// index, records as failed the nodes that hold blocks but are missing
// from the inventory (reportMissing) and returns a ready service. The
// reconciler is started separately with Run.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Wall{}
	}
	if checkStore != nil {
		cfg.Store = checkStore(cfg.Store)
	}
	secret, err := SigningSecret(ctx, cfg.Store, cfg.SecretsKey, cfg.Log)
	if err != nil {
		return nil, fmt.Errorf("loading the offering signing secret: %w", err)
	}
	s := &Service{
		fleet: cfg.Fleet, store: cfg.Store, backend: cfg.Backend, clock: cfg.Clock, log: cfg.Log,
		secret: secret, events: make(chan struct{}), allowPrivateWebhooks: cfg.AllowPrivateWebhooks,
		webhookLogRetention: cfg.WebhookLogRetention,
		metrics:             newServiceMetrics(),
		outbox:              newOutboxRuntime(cfg.Outbox),
		ordersKick:          make(chan struct{}, 1),
		enginePoll:          cmp.Or(cfg.EnginePoll, defaultEnginePoll),
		jobsOff:             cfg.JobsOff,
		secretsKey:          cfg.SecretsKey,
	}
	s.settled = sync.NewCond(&s.mu)
	if s.webhookLogRetention <= 0 {
		s.webhookLogRetention = defaultWebhookLogRetention
	}
	if s.jobs, err = newJobs(cfg, secret); err != nil {
		return nil, err
	}
	// The fleet's nodes are the backend's inventory; a node that live
	// blocks hold but that the inventory lacks stays, as a stand-in,
	// and is recorded as failed once the service is built.
	nodes, err := inventoryNodes(ctx, cfg.Backend, cfg.Fleet, cfg.Log)
	if err != nil {
		return nil, err
	}
	if s.health, err = s.readHealth(ctx); err != nil {
		return nil, err
	}
	blocks, err := s.store.ListBlocks(ctx, store.BlockFilter{States: liveStates})
	if err != nil {
		return nil, fmt.Errorf("loading live blocks: %w", err)
	}
	missing := missingNodes(nodes, blocks)
	s.fleet.Nodes = append(nodes, missing...)
	fleet := s.fleet
	fleet.Nodes = s.currentNodes()
	if s.index, err = s.newIndex(fleet, blocks); err != nil {
		return nil, err
	}
	if err := s.reportMissing(ctx, missing); err != nil {
		return nil, err
	}
	if err := s.checkSealedKeys(ctx); err != nil {
		return nil, err
	}
	if err := s.sealWebhookSecrets(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// newIndex builds an index of fleet (its nodes with their health) with
// blocks, from now. It reads nothing that mu guards.
func (s *Service) newIndex(fleet core.Fleet, blocks []core.Block) (*core.Index, error) {
	ix, err := core.NewIndex(&fleet, blocks, s.clock.Now())
	if err != nil {
		return nil, fmt.Errorf("building the availability index: %w", err)
	}
	if s.sharesStore() {
		// Replicas deciding at once on the same snapshot would otherwise
		// all choose the same nodes, and all but one would conflict.
		ix.Spread = mathrand.IntN
	}
	return ix, nil
}

var liveStates = []core.BlockState{core.StatePaymentPending, core.StateScheduled, core.StateActive}

// currentNodes returns the fleet's nodes with their recorded health.
// Callers hold mu (shared is enough).
func (s *Service) currentNodes() []core.Node {
	nodes := make([]core.Node, len(s.fleet.Nodes))
	for i, n := range s.fleet.Nodes {
		n.Health = s.healthOf(n.Name)
		nodes[i] = n
	}
	return nodes
}

// Fleet returns the fleet with each node's current health.
func (s *Service) Fleet() core.Fleet {
	s.mu.RLock()
	defer s.mu.RUnlock()
	f := s.fleet
	f.Nodes = s.currentNodes()
	return f
}

// Now is the service's current time.
func (s *Service) Now() time.Time { return s.clock.Now() }

// Ready reports whether the database answers.
// Ready reports whether the database answers and whether the index's
// lock is free (stuck.go).
func (s *Service) Ready(ctx context.Context) error {
	if d := s.stuck(); d > 0 {
		return errStuck(d)
	}
	return s.store.Ping(ctx)
}

// SimClock returns the simulated clock, or nil on the wall clock.
func (s *Service) SimClock() contract.SimClock {
	sim, ok := s.clock.(*clock.Sim)
	if !ok {
		return nil
	}
	return simClock{sim: sim, svc: s}
}

// simClock moves the simulated clock and then reconciles at once, so the
// caller sees every transition that became due.
type simClock struct {
	sim *clock.Sim
	svc *Service
}

func (c simClock) Now() time.Time { return c.sim.Now() }

func (c simClock) Advance(d time.Duration) (time.Time, error) {
	if d < 0 {
		return c.sim.Now(), core.Invalidf("advance %s is negative: the simulated clock cannot go backwards", d)
	}
	return c.Set(c.sim.Now().Add(d))
}

// Set stores the new time before the clock shows it, so that a restart
// never finds the clock behind what a client saw.
func (c simClock) Set(t time.Time) (time.Time, error) {
	now := c.sim.Now()
	if t.Before(now) {
		return now, core.Invalidf("%s is before the simulated now %s: the clock cannot go backwards", t.Format(time.RFC3339), now.Format(time.RFC3339))
	}
	if err := clock.CheckRange(t); err != nil {
		return now, err // a front end maps clock.ErrOutOfRange to a bad request
	}
	stored, err := c.svc.store.SaveSimClock(context.Background(), t)
	if err != nil {
		return now, fmt.Errorf("storing the simulated clock: %w", err)
	}
	now, err = c.sim.Set(stored) // later than t when another replica moved it further
	if errors.Is(err, clock.ErrBackwards) {
		err = nil // moved further here meanwhile
	}
	if err != nil {
		return now, err
	}
	c.svc.kickOrders() // deadlines may have passed
	// The clock has moved, stored: that is the answer. A reconcile that
	// fails now is the leader's to do again at its next tick (every
	// simTick); answering its error would have a client that retries an
	// advance move the clock twice.
	if err := c.svc.reconcileHere(context.Background()); err != nil {
		c.svc.log.Error("reconciling after the simulated clock moved; the leader tries again at its next tick",
			"now", now.Format(time.RFC3339), "err", err)
	}
	return now, nil
}

// reconcileHere reconciles at once when this replica runs the reconciler:
// always on a store of its own, while it holds the lead on a shared one
// (the leader, its clock moved too, catches up within simTick).
func (s *Service) reconcileHere(ctx context.Context) error {
	if s.sharesStore() && !s.Leading() {
		return nil
	}
	return s.Reconcile(ctx)
}

// Availability returns free instances per hour.
func (s *Service) Availability(_ context.Context, instanceType, zone string, from, to time.Time) ([]core.Slot, error) {
	t, ok := s.fleet.Type(instanceType)
	if !ok {
		return nil, core.Invalidf("unknown instance type %q (GET /v1/instance-types lists them)", instanceType)
	}
	if zone != "" && !contains(s.fleet.Zones(t.GPUModel), zone) {
		return nil, core.Invalidf("zone %q has no %s capacity; zones: %v", zone, t.Name, s.fleet.Zones(t.GPUModel))
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.index.Availability(t, zone, from, to)
}

// Offerings searches offerings and signs them. When req names a team,
// they respect its effective quota of each type, as its purchase would
// (core.Index.Search); a request beyond it is refused with the limit.
func (s *Service) Offerings(ctx context.Context, req core.SearchRequest) ([]core.Offering, error) {
	if req.Zone != "" && !s.knownZone(req.Zone) {
		return nil, core.Invalidf("unknown zone %q", req.Zone)
	}
	quotas, err := s.searchQuotas(ctx, req.Team, req.Types)
	if err != nil {
		return nil, err
	}
	req.Quotas = quotas
	s.mu.RLock()
	offers, err := s.index.Search(req, s.clock.Now())
	s.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	for i := range offers {
		offers[i].Sign(s.secret)
	}
	return offers, nil
}

func (s *Service) knownZone(zone string) bool {
	for _, n := range s.fleet.Nodes {
		if n.Zone == zone {
			return true
		}
	}
	return false
}

// notifyEvents wakes the long polls.
func (s *Service) notifyEvents() {
	s.eventsMu.Lock()
	close(s.events)
	s.events = make(chan struct{})
	s.eventsMu.Unlock()
}

func (s *Service) eventsChanged() <-chan struct{} {
	s.eventsMu.Lock()
	defer s.eventsMu.Unlock()
	return s.events
}

// newID returns prefix-<17 hex digits>, like the ids of the cloud.
func newID(prefix string) string {
	var b [9]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return prefix + "-" + hex.EncodeToString(b[:])[:17]
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// Simulated reports whether the service runs on a simulated clock.
func (s *Service) Simulated() bool { return s.SimClock() != nil }
