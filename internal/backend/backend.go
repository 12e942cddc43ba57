// Package backend turns blocks into reality on machines, and runs the
// jobs on them. Each backend implements small, synchronous, idempotent
// calls. The service does not call them from its decisions: each decision
// stores the engine actions it causes (core.Action) in its own commit,
// and the outbox worker of the leading replica applies them with Apply,
// repeating each until the backend takes it, across crashes and changes
// of leader:
//
//	step                  sim, local (package local)    kubernetes (package kubernetes)      slurm
//	node is sold          -                             NoSchedule taint capblock.io/sold    -
//	block becomes active  record                        label block.capblock.io/<block>=     scontrol create reservation named
//	                                                    <team> on its nodes                   after the block: nodes, start, end
//	run a job instance    OS process (executor) under a  Job/pod tolerating the taint,         sbatch --reservation=<block>
//	                      shim, as the team's user, in   selecting the label, GPUs requested
//	                      a cgroup, CUDA_VISIBLE_DEVICES
//	stop an instance      SIGTERM to its cgroup,         delete the pod: its grace period,     scancel --signal=TERM, then
//	                      SIGKILL after the grace        then SIGKILL                          scancel after the grace
//	instance exits        the shim's exit, or its exit   pod phase and container exit code     sacct state and exit code
//	                      file for an adopted one        (informer)                            (polled)
//	after a restart       adopt running processes        list pods by job label                squeue/sacct by job name
//	termination (end-30m) stop the block's instances     evict the block's pods                cancel the reservation's jobs
//	block ends            release                       remove its label, delete its pods     delete the reservation
//
// Inventory is the other way in: the nodes the engine has (the sim: the
// fleet file's; local: this host's GPUs; Kubernetes: Node objects with
// nvidia.com/gpu; Slurm: scontrol show nodes). The service builds its
// fleet's nodes from it at start.
//
// Workloads carry jobs' instances: the service describes each without the
// engine (Workload), and a run's key (job id and run) names the
// processes, pods or Slurm jobs, so that a new server finds them again.
//
// This package holds the interfaces and the types that the engines and
// the service share; each engine is a package of its own: local (the sim,
// and jobs as processes of this machine), kubernetes and slurm.
package backend

import (
	"context"

	"capblock/internal/core"
)

// Backend reports the engine's nodes and acts on blocks. Every call is
// idempotent.
type Backend interface {
	// Name is the backend's name as given to --backend.
	Name() string
	// Inventory reports the nodes the engine has: name, zone, rack, GPU
	// model, GPU count and labels. Health is not part of it (the
	// service records health apart); the returned slice is the
	// caller's.
	Inventory(ctx context.Context) ([]core.Node, error)
	// Activate makes the block's GPUs usable by its workloads.
	Activate(ctx context.Context, b core.Block) error
	// Terminate stops the block's workloads ahead of its end.
	Terminate(ctx context.Context, b core.Block) error
	// Release gives the block's GPUs back when it ends or is cancelled.
	Release(ctx context.Context, b core.Block) error
}

// Reserver is a Backend that holds a block's nodes in the engine from
// its purchase on, before it starts: Slurm, whose own scheduler would
// otherwise start a long job there that runs into the block. Reserve
// is applied at the purchase and whenever the block's placement or
// window changes before its start; it is idempotent, and takes the
// block as it is now (nodes, start, end), creating or updating. Backends
// that only act from a block's start (Kubernetes: labels) do not
// implement it, and the service then stores no reserve actions.
type Reserver interface {
	Reserve(ctx context.Context, b core.Block) error
}

// HealthReporter is a Backend that knows its nodes' health (Kubernetes:
// NotReady or cordoned; Slurm: down or drained). The leader reads it at
// every poll of the engine, with the inventory, and records what changed
// (service/enginewatch.go). A node it does not mention is healthy; a
// node missing from the inventory is unhealthy whatever it says.
type HealthReporter interface {
	// NodeHealth reports the health of the engine's nodes, each
	// unhealthy one with the engine's reason ("NotReady since 12:03",
	// "drained: XID 79"); Since and Source are not read.
	NodeHealth(ctx context.Context) ([]core.NodeHealth, error)
}
