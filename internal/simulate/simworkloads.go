package simulate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"capblock/internal/backend"
)

// simWorkloads is the engine that runs the jobs' instances in the
// simulation (backend.Workloads), in place of processes: an instance
// runs from its Start until a step decides that it exits (it succeeds,
// fails or crashes: opInstanceExit), or until it is stopped, when its
// kill falls due on the service's clock. Nothing of it runs between
// steps: its ends are put on the open Instances' Exits as the steps
// decide them, and the leader's pass (JobsOnce) takes them.
//
// Instances outlive the server, as the local engine's shims do: a crash
// drops the service, not them; the next leader's Open takes over (the
// Instances of the server before refuses every call, as a deposed
// leader's would be), its Adopt finds them, and the ends that no server
// took come on its Exits.
//
// The seed's faults: a Start that fails (nothing runs), a Stop that
// fails or loses its answer (the stop reached the instance), and an end
// reported late, some steps after it happened.
//
// It records what the checks need: every live instance with the
// workload the service gave it and its GPUs, and the instances started
// since the last check.
type simWorkloads struct {
	rng    *rand.Rand
	now    func() time.Time
	faults workloadFaults
	off    bool // faults off (quiescence)

	open *simInstances // the Instances of the last Open; nil before
	live map[instKey]*simInst
	// ended are the ends no Instances has taken yet, in the order they
	// happened; late, the ends held back until their step.
	ended []backend.InstanceExit
	late  []lateExit
	step  int // the world's step, for the late ends
	// started are the instances started since the checker last looked;
	// doubled a start of an instance that was already live.
	started []*simInst
	doubled string
	// counts, for the report.
	starts, startsFailed, stopsFailed, stopsLost, exitsLate int
}

// workloadFaults are the rates of the engine's faults, per call.
type workloadFaults struct {
	startFails, stopFails, stopLosesAnswer, exitLate float64
}

var defaultWorkloadFaults = workloadFaults{startFails: 0.05, stopFails: 0.05, stopLosesAnswer: 0.05, exitLate: 0.1}

// errWorkloadsMoved answers the calls of an Instances that a later Open
// took over from.
var errWorkloadsMoved = errors.New("another server opened the workloads since")

// instKey names one instance: its run and its rank.
type instKey struct {
	run  string
	rank int
}

func (k instKey) String() string { return fmt.Sprintf("%s#%d", k.run, k.rank) }

// simInst is an instance that runs: the workload it was started with,
// the GPUs it has, and its kill, once stopped.
type simInst struct {
	key     instKey
	w       backend.Workload
	gpus    []gpuKey
	startAt time.Time
	// stopped says a stop reached it; it is killed at killAt, unless it
	// exits first.
	stopped bool
	killAt  time.Time
}

type lateExit struct {
	x   backend.InstanceExit
	due int // the step from which it is reported
}

func newSimWorkloads(rng *rand.Rand, now func() time.Time) *simWorkloads {
	return &simWorkloads{rng: rng, now: now, faults: defaultWorkloadFaults, live: map[instKey]*simInst{}}
}

// Open takes the workloads over for a new leader: the Instances before
// refuses every call from now on, and the ends it had not handed out
// are the new one's.
func (s *simWorkloads) Open() (backend.Instances, error) {
	if s.open != nil {
		s.open.closed = true
		var carried []backend.InstanceExit
		for len(s.open.exits) > 0 {
			carried = append(carried, <-s.open.exits)
		}
		s.ended = append(carried, s.ended...)
	}
	s.open = &simInstances{s: s, exits: make(chan backend.InstanceExit, 1<<12)}
	return s.open, nil
}

// ReadLog reads nothing: the simulated instances print nothing.
func (s *simWorkloads) ReadLog(context.Context, string, int, int64, int) ([]byte, int64, error) {
	return nil, 0, nil
}

// fault draws whether a fault of rate p happens.
func (s *simWorkloads) fault(p float64) bool { return !s.off && s.rng.Float64() < p }

// exit ends a live instance with code (the reason names a supervisor's
// kill), reported now or, one time in ten, some steps later.
func (s *simWorkloads) exit(k instKey, code int, reason string) {
	delete(s.live, k)
	x := backend.InstanceExit{JobID: k.run, Instance: k.rank, Code: code, Reason: reason}
	if s.fault(s.faults.exitLate) {
		s.exitsLate++
		s.late = append(s.late, lateExit{x: x, due: s.step + 1 + s.rng.IntN(20)})
		return
	}
	s.ended = append(s.ended, x)
}

// tick runs the engine's own work at the end of a step: the instances
// whose kill is due die, and the late ends due are reported. Each end
// goes to the open Instances' Exits.
func (s *simWorkloads) tick(step int) {
	s.step = step
	now := s.now()
	for _, k := range s.running() {
		in := s.live[k]
		switch {
		case in.stopped && s.off:
			s.exit(k, 143, "") // quiescence: it heeds its SIGTERM
		case in.stopped && !now.Before(in.killAt):
			s.exit(k, 137, "killed after its grace")
		}
	}
	kept := s.late[:0]
	for _, l := range s.late {
		if l.due <= step || s.off {
			s.ended = append(s.ended, l.x)
		} else {
			kept = append(kept, l)
		}
	}
	s.late = kept
	s.deliver()
}

// deliver hands the ends no Instances took to the open one.
func (s *simWorkloads) deliver() {
	if s.open == nil {
		return
	}
	for _, x := range s.ended {
		select {
		case s.open.exits <- x:
		default:
			panic("the simulated workloads' exits channel is full")
		}
	}
	s.ended = s.ended[:0]
}

// running are the live instances, in order.
func (s *simWorkloads) running() []instKey {
	keys := make([]instKey, 0, len(s.live))
	for k := range s.live {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b instKey) int {
		if c := strings.Compare(a.run, b.run); c != 0 {
			return c
		}
		return a.rank - b.rank
	})
	return keys
}

// takeStarted are the instances started since the last call.
func (s *simWorkloads) takeStarted() []*simInst {
	out := s.started
	s.started = nil
	return out
}

// simInstances is one leader's hold on the workloads.
type simInstances struct {
	s      *simWorkloads
	exits  chan backend.InstanceExit
	closed bool
}

func (i *simInstances) Start(_ context.Context, w backend.Workload) error {
	s := i.s
	if i.closed {
		return errWorkloadsMoved
	}
	if s.fault(s.faults.startFails) {
		s.startsFailed++
		return fmt.Errorf("starting %s#%d: %w", w.Run, w.Rank, errInjected)
	}
	k := instKey{w.Run, w.Rank}
	if _, ok := s.live[k]; ok && s.doubled == "" {
		s.doubled = fmt.Sprintf("instance %s started while it runs", k)
	}
	s.starts++
	in := &simInst{key: k, w: w, gpus: workloadGPUs(w), startAt: s.now()}
	s.live[k] = in
	s.started = append(s.started, in)
	return nil
}

func (i *simInstances) Stop(run string, instance int, grace time.Duration) error {
	s := i.s
	if i.closed {
		return errWorkloadsMoved
	}
	if s.fault(s.faults.stopFails) {
		s.stopsFailed++
		return fmt.Errorf("stopping %s#%d: %w", run, instance, errInjected)
	}
	if in, ok := s.live[instKey{run, instance}]; ok {
		at := s.now().Add(grace)
		if !in.stopped || at.Before(in.killAt) {
			in.killAt = at
		}
		in.stopped = true
	}
	if s.fault(s.faults.stopLosesAnswer) {
		s.stopsLost++
		return fmt.Errorf("the answer to stopping %s#%d: %w", run, instance, errInjected)
	}
	return nil
}

// Adopt finds every live instance: an instance never outlives its
// engine here, and the engine outlives every server.
func (i *simInstances) Adopt() ([]backend.RunningInstance, error) {
	if i.closed {
		return nil, errWorkloadsMoved
	}
	var out []backend.RunningInstance
	for _, k := range i.s.running() {
		out = append(out, backend.RunningInstance{Run: k.run, Instance: k.rank})
	}
	i.s.deliver() // the ends that came while no server watched
	return out, nil
}

func (i *simInstances) Exits() <-chan backend.InstanceExit { return i.exits }

func (i *simInstances) Close() error {
	i.closed = true
	return nil
}

// workloadGPUs are the GPUs of w's slot, as the engines give them
// (backend.SlotGPUs); nil for a slot the block does not have, which the
// checks report.
func workloadGPUs(w backend.Workload) []gpuKey {
	node, gpus, ok := backend.SlotGPUs(w.Block, w.GPUsPerInstance, w.Slot())
	if !ok {
		return nil
	}
	out := make([]gpuKey, len(gpus))
	for k, g := range gpus {
		out[k] = gpuKey{node, g}
	}
	return out
}

// settled reports whether the workloads are quiet: no instance stopped
// and still there, no end held back or not yet taken by the leader.
func (s *simWorkloads) settled() bool {
	for _, in := range s.live {
		if in.stopped {
			return false
		}
	}
	return len(s.late) == 0 && len(s.ended) == 0 && (s.open == nil || len(s.open.exits) == 0)
}
