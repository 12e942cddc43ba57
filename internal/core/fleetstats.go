package core

import (
	"math/bits"
	"sort"
	"time"
)

// PoolStats is what one pool (the nodes of one GPU model in one zone)
// is doing in the hour that holds a time: its GPUs, those booked by live
// blocks, those free to book (on healthy nodes, not booked) and those of
// unhealthy nodes. Booked GPUs of an unhealthy node count as booked and
// unhealthy both, so Free = GPUs − Unhealthy − (Booked − UnhealthyBooked);
// UnhealthyBooked are those a live block holds on an unhealthy node (no
// replacement was free for them).
type PoolStats struct {
	GPUModel        string
	Zone            string
	GPUs            int
	Booked          int
	Free            int
	Unhealthy       int
	UnhealthyBooked int
}

// FleetStats returns the pools' stats in the hour that holds now, by GPU
// model then zone (pools of one model and zone with nodes of different
// sizes are summed), and the live blocks by state. It reads the pools'
// hour-by-hour summaries and walks the allocations of unhealthy nodes
// only, so it costs a look at each node's health, not a walk of every
// node's blocks. Blocks in flight count as the index takes them: assumed.
func (ix *Index) FleetStats(now time.Time) ([]PoolStats, map[BlockState]int) {
	h := 0
	if now.After(ix.Origin) {
		h = int(now.Sub(ix.Origin) / time.Hour)
	}
	at := map[[2]string]int{} // a model and zone's place in out
	var out []PoolStats
	for _, p := range ix.pools {
		key := [2]string{p.model, p.zone}
		i, ok := at[key]
		if !ok {
			i = len(out)
			at[key] = i
			out = append(out, PoolStats{GPUModel: p.model, Zone: p.zone})
		}
		st := &out[i]
		booked := int(p.usedAt(h))
		bookedUnhealthy, unhealthy := 0, 0
		for _, ni := range p.nodes {
			ns := &ix.nodes[ni]
			if ns.node.Health != Unhealthy {
				continue
			}
			unhealthy += ns.node.GPUs
			var used uint64
			for a := range ns.allocs.all() {
				if a.start > h {
					break
				}
				if a.end > h {
					used |= a.mask
				}
			}
			bookedUnhealthy += bits.OnesCount64(used)
		}
		gpus := len(p.nodes) * p.gpus
		st.GPUs += gpus
		st.Booked += booked
		st.Unhealthy += unhealthy
		st.UnhealthyBooked += bookedUnhealthy
		st.Free += gpus - unhealthy - (booked - bookedUnhealthy)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].GPUModel != out[j].GPUModel {
			return out[i].GPUModel < out[j].GPUModel
		}
		return out[i].Zone < out[j].Zone
	})
	blocks := map[BlockState]int{}
	for _, b := range ix.blocks {
		blocks[b.State]++
	}
	return out, blocks
}
