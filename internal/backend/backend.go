// Package backend turns blocks into reality on machines. Each backend
// implements small, synchronous, idempotent calls that the reconciler may
// repeat after a crash:
//
//	step                 sim        local      kubernetes                       slurm
//	block becomes active record     record     label + NoSchedule taint         scontrol create reservation
//	termination (end-30m) SIGTERM   SIGTERM    evict pods with grace period     cancel the reservation's jobs
//	block ends           release    release    remove label and taint           delete the reservation
//
// Only the sim backend exists so far.
package backend

import (
	"context"

	"capblock/internal/core"
)

// Backend acts on blocks. Every call is idempotent.
type Backend interface {
	// Name is the backend's name as given to --backend.
	Name() string
	// Activate makes the block's GPUs usable by its workloads.
	Activate(ctx context.Context, b core.Block) error
	// Terminate stops the block's workloads ahead of its end.
	Terminate(ctx context.Context, b core.Block) error
	// Release gives the block's GPUs back when it ends or is cancelled.
	Release(ctx context.Context, b core.Block) error
}
