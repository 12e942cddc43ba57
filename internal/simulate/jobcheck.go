package simulate

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"capblock/internal/core"
	"capblock/internal/store"
)

// The jobs' invariants. After each step: every instance the step
// started runs on GPUs of an active block of its own team that holds
// them (a spot instance on GPUs that no block holds now, or that a
// block lends: DESIGN.md, invariants 5 and 8), on GPUs no other live
// instance has, and never twice; every job the step wrote is in the
// state its events say (invariant 7). The ledger checks the spot
// charges with every other journal (ledger.go). Once the world is quiet,
// the instances that run are exactly those the store says should
// (invariant 11): the current run of each running job, on a block that
// is active, or on backfill no block needs.

// checkJobs runs the engine's work of the step's end (simWorkloads.tick)
// and checks what the step did to jobs: it costs the instances started
// and the jobs written, not every job.
func (w *world) checkJobs() {
	w.wl.tick(w.step)
	if w.wl.doubled != "" {
		w.fail("%s", w.wl.doubled)
	}
	for _, in := range w.wl.takeStarted() {
		w.checkStart(in)
	}
	ids := w.fs.takeJobsWritten()
	slices.Sort(ids)
	for _, id := range slices.Compact(ids) {
		j, err := w.st.Job(w.ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue // a commit that did not store it
		}
		if err != nil {
			w.fail("reading job %s: %v", id, err)
		}
		if st, ok := w.jobs.evState[id]; !ok || st != j.State {
			w.fail("job %s is %s in the store; its events say %q", id, j.State, st)
		}
	}
}

// checkStart checks where an instance started.
func (w *world) checkStart(in *simInst) {
	id, what := in.w.JobID, fmt.Sprintf("instance %s (team %s)", in.key, w.teamName(in.w.Team))
	j, err := w.st.Job(w.ctx, id)
	if err != nil {
		w.fail("reading job %s of %s: %v", id, what, err)
	}
	if j.Team != in.w.Team {
		w.fail("%s runs for team %s; its job is %s's", what, w.teamName(in.w.Team), w.teamName(j.Team))
	}
	if len(in.gpus) == 0 {
		w.fail("%s was given slot %d, which its block %s does not have", what, in.w.Slot(), in.w.Block.ID)
	}
	if j.Preemptible {
		w.checkSpotGPUs(in, what)
	} else {
		b, err := w.st.GetBlock(w.ctx, in.w.Block.ID)
		if err != nil {
			w.fail("reading block %s of %s: %v", in.w.Block.ID, what, err)
		}
		at := in.startAt
		switch {
		case b.Team != j.Team:
			w.fail("%s started on block %s of team %s", what, b.ID, w.teamName(b.Team))
		case b.State != core.StateActive || at.Before(b.Start) || !at.Before(b.End):
			w.fail("%s started at %s on block %s, %s from %s to %s", what, at.Format(time.RFC3339), b.ID, b.State,
				b.Start.Format(time.RFC3339), b.End.Format(time.RFC3339))
		}
		for _, g := range in.gpus {
			if !holdsGPU(b, g) {
				w.fail("%s runs on GPU %s/%d, which its block %s does not hold", what, g.node, g.gpu, b.ID)
			}
		}
	}
	// No GPU of two live instances, whatever their jobs.
	for _, k := range w.wl.running() {
		o := w.wl.live[k]
		if o == in {
			continue
		}
		for _, g := range in.gpus {
			if slices.Contains(o.gpus, g) {
				w.fail("%s started on GPU %s/%d, which instance %s (team %s, stopped %v) runs on", what, g.node, g.gpu, k,
					w.teamName(o.w.Team), o.stopped)
			}
		}
	}
}

// checkSpotGPUs checks that a spot instance starts on GPUs that no
// block holds now, or that the block holding them lends.
func (w *world) checkSpotGPUs(in *simInst, what string) {
	at := in.startAt
	for _, g := range in.gpus {
		for _, h := range w.chk.alloc[g] {
			if at.Before(h.start) || !at.Before(h.end) {
				continue
			}
			if b, ok := w.chk.stored[h.block]; ok && b.State.Live() && !b.Lending {
				w.fail("spot %s started on GPU %s/%d, which block %s (team %s, %s) holds and does not lend", what, g.node, g.gpu,
					b.ID, w.teamName(b.Team), b.State)
			}
		}
	}
}

// holdsGPU reports whether block b holds GPU g.
func holdsGPU(b core.Block, g gpuKey) bool {
	for _, p := range b.Placements {
		if p.Node == g.node && slices.Contains(p.GPUs, g.gpu) {
			return true
		}
	}
	return false
}

// checkJobsFinal checks, once the world is quiet, that the instances
// that run are those the store says should: each instance of the
// current run of every running job that has not succeeded, and no other.
func (w *world) checkJobsFinal() {
	jobs, err := w.st.ListJobs(w.ctx, "", true)
	if err != nil {
		w.fail("listing the open jobs: %v", err)
	}
	want := map[instKey]core.Job{}
	for _, j := range jobs {
		if j.State != core.JobRunning {
			continue
		}
		for i := range j.InstanceCount {
			if !slices.Contains(j.Done, i) {
				want[instKey{fmt.Sprintf("%s/%d", j.ID, j.Run), i}] = j
			}
		}
		if j.Preemptible {
			continue
		}
		b, err := w.st.GetBlock(w.ctx, j.BlockID)
		if err != nil {
			w.fail("reading block %s of job %s: %v", j.BlockID, j.ID, err)
		}
		if b.State != core.StateActive || b.Terminating {
			w.fail("after quiescence job %s runs on block %s, which is %s (terminating %v)", j.ID, b.ID, b.State, b.Terminating)
		}
	}
	for _, k := range w.wl.running() {
		in := w.wl.live[k]
		if _, ok := want[k]; !ok {
			w.fail("after quiescence instance %s of team %s runs (stopped %v); the store has no running job's run for it",
				k, w.teamName(in.w.Team), in.stopped)
		}
	}
	keys := slices.SortedFunc(maps.Keys(want), func(a, b instKey) int { return strings.Compare(a.String(), b.String()) })
	for _, k := range keys {
		if j := want[k]; w.wl.live[k] == nil {
			w.fail("after quiescence job %s (team %s) is running, and its instance %s is not", j.ID, w.teamName(j.Team), k)
		}
	}
}
