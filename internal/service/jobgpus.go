package service

import (
	"context"
	"fmt"

	"capblock/internal/backend"
	"capblock/internal/core"
)

// An instance's GPUs outlive its run's decision: a run stopped late (a
// leader that came back after its block had ended, an engine that keeps
// no deadline) still has its GPUs until its last instance is gone, even
// though its block no longer holds them. The GPUs a block or backfill
// hands on then are not free yet: an instance that would start on a GPU
// that another run's instance still has waits until that one has ended
// (gpuBusy), as a job's next run waits for its earlier one.

// gpuID names one GPU of a node.
type gpuID struct {
	node string
	gpu  int
}

func (g gpuID) String() string { return fmt.Sprintf("%s/%d", g.node, g.gpu) }

// slotGPUs are the GPUs of slot of a block, as the engines give them
// (backend.SlotGPUs); nil for a slot the block does not have.
func slotGPUs(b core.Block, perInstance, slot int) []gpuID {
	node, gpus, ok := backend.SlotGPUs(b, perInstance, slot)
	if !ok {
		return nil
	}
	out := make([]gpuID, len(gpus))
	for k, g := range gpus {
		out[k] = gpuID{node, g}
	}
	return out
}

// anyGPU stands for the GPUs of an adopted instance that the store no
// longer tells (its run was preempted and its backfill let go while a
// stop of it failed): it may hold any GPU, so every start waits until
// it has ended, which its stop bounds.
var anyGPU = gpuID{node: "*"}

// gpuBusy names another run's live instance that has one of gpus, or
// "". Callers hold s.jobs.mu.
func (r *jobRuntime) gpuBusy(run string, gpus []gpuID) string {
	for k, has := range r.gpus {
		if k.run == run || !r.live[k.run][k.instance] {
			continue
		}
		for _, g := range has {
			if g == anyGPU {
				return fmt.Sprintf("instance %d of run %s, adopted, may still use any GPU", k.instance, k.run)
			}
			for _, want := range gpus {
				if g == want {
					return fmt.Sprintf("GPU %s is still used by instance %d of run %s", g, k.instance, k.run)
				}
			}
		}
	}
	return ""
}

// adoptedGPUs are the GPUs of instance i of job j's run, adopted from an
// earlier server: its backfill allocation, or its slot of its block.
func (s *Service) adoptedGPUs(ctx context.Context, j core.Job, i int) []gpuID {
	if j.Preemptible {
		if i >= len(j.Backfill) {
			return nil
		}
		var out []gpuID
		for _, g := range j.Backfill[i].GPUs {
			out = append(out, gpuID{j.Backfill[i].Node, g})
		}
		return out
	}
	b, err := s.store.GetBlock(ctx, j.BlockID)
	if err != nil {
		s.log.Warn("loading the block of an adopted instance", "job", j.ID, "block", j.BlockID, "err", err)
		return nil
	}
	t, _ := s.fleet.Type(b.InstanceType)
	slot := i
	if i < len(j.Slots) {
		slot = j.Slots[i]
	}
	return slotGPUs(b, t.GPUsPerInstance, slot)
}
