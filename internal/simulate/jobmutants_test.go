package simulate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"capblock/internal/backend"
	"capblock/internal/core"
	"capblock/internal/simulate"
	"capblock/internal/store"
)

// Job mutants: a runner or a store with a defect planted in the jobs'
// path. Each must be found within mutantSeeds seeds of mutantOps steps,
// as the others.

// deafWorkloads are workloads whose instances are told they stop and go
// on running: a runner that does not stop an instance when its block
// ends, or its job is stopped. Every stop is ignored, so that the 300
// steps of a run under the race detector find it too.
type deafWorkloads struct{ backend.Workloads }

func (d deafWorkloads) Open() (backend.Instances, error) {
	ins, err := d.Workloads.Open()
	return &deafInstances{Instances: ins}, err
}

type deafInstances struct{ backend.Instances }

func (d *deafInstances) Stop(run string, instance int, grace time.Duration) error { return nil }

// jobWrites matches the commits that write a job.
func jobWrites(c store.Change) bool { return len(c.Jobs) > 0 }

func TestJobMutants(t *testing.T) {
	for _, mu := range []struct {
		name      string
		store     func(store.Full) store.Full
		workloads func(backend.Workloads) backend.Workloads
		want      string
	}{
		{
			name:      "a runner that does not stop instances",
			workloads: func(w backend.Workloads) backend.Workloads { return deafWorkloads{w} },
			want:      `after quiescence instance .* runs|started on GPU .* which instance .* runs on`,
		},
		{
			name: "a job changes state without its event",
			store: func(full store.Full) store.Full {
				return &mutant{Full: full, match: jobWrites, commit: func(ctx context.Context, full store.Full, c store.Change, n int) error {
					if n >= 3 {
						var kept []core.Event
						for _, e := range c.Events {
							if !strings.HasPrefix(e.Subject, "job-") {
								kept = append(kept, e)
							}
						}
						c.Events = kept
					}
					return full.Commit(ctx, c)
				}}
			},
			want: `job .* is .* in the store; its events say`,
		},
	} {
		t.Run(mu.name, func(t *testing.T) {
			dir := memDir(t)
			huntMutant(t, simulate.Config{Ops: mutantOps(), Dir: dir, Faults: testFaults(),
				Mutant: mu.store, MutantWorkloads: mu.workloads}, mu.want)
		})
	}
}
