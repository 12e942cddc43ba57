package simulate

import (
	"slices"

	"capblock/internal/core"
)

// Inventory: the fleet's nodes are the engine's inventory, read when the
// service starts (the engine watch that reads it later runs on a
// goroutine of the leader's, not in LeadOnce). An operator who gains a
// node or loses one restarts the server: a node that left while live
// blocks hold it stays as a stand-in, recorded failed by the engine, and
// its blocks move off it where capacity allows; a node back whose
// record is that failure is healthy again; a node gained is sold.

// spareNodes are nodes the fleet may gain: one H100 node on a rack of
// its own, one L4 node beside the others.
var spareNodes = []core.Node{
	{Name: "h4", Zone: "z1", Rack: "r2", GPUModel: "H100", GPUs: 8, Health: core.Healthy},
	{Name: "l2", Zone: "z1", Rack: "r9", GPUModel: "L4", GPUs: 4, Health: core.Healthy},
}

// opInventory looks at a node of the fleet or a spare one and decides,
// as a coin falls, that the engine's inventory has it or not: a node
// that joins or leaves restarts the service on the new inventory; one
// that stays as it was changes nothing. A node never leaves when it is
// the last of its GPU model, or while its health change waits for its
// outcome.
func (w *world) opInventory() {
	pool := append(simFleet().Nodes, spareNodes...)
	n := pool[w.rng.IntN(len(pool))]
	want := w.rng.IntN(2) == 0
	at := slices.IndexFunc(w.fleet.Nodes, func(m core.Node) bool { return m.Name == n.Name })
	if want == (at >= 0) {
		w.begin("inventory: node %s stays", n.Name)
		return
	}
	nodes := slices.Clone(w.fleet.Nodes)
	if want {
		w.begin("inventory: node %s joins; restart", n.Name)
		w.count("inventory/join")
		nodes = append(nodes, n)
		if w.m.missing[n.Name] {
			// Its record is the engine's word that it left: it is healthy
			// again once the engine reports it.
			w.m.health[n.Name] = core.Healthy
			delete(w.m.missing, n.Name)
		}
	} else {
		same := 0
		for _, m := range w.fleet.Nodes {
			if m.GPUModel == n.GPUModel {
				same++
			}
		}
		if same == 1 || w.m.pendingNode(n.Name) {
			w.begin("inventory: node %s stays, the last of its model or waiting for its health", n.Name)
			return
		}
		w.begin("inventory: node %s leaves; restart", n.Name)
		w.count("inventory/leave")
		nodes = slices.Delete(nodes, at, at+1)
		if w.holdsLive(n.Name) && w.m.health[n.Name] != core.Unhealthy {
			// Recorded failed by the engine at the start, so that its
			// blocks move off it.
			w.m.health[n.Name] = core.Unhealthy
			w.m.missing[n.Name] = true
		}
	}
	w.engine.setInventory(nodes)
	w.fleet.Nodes = nodes
	w.crash()
}

// holdsLive reports whether a live block, as last read, is placed on
// node.
func (w *world) holdsLive(node string) bool {
	for _, b := range w.chk.stored {
		if !b.State.Live() {
			continue
		}
		for _, pl := range b.Placements {
			if pl.Node == node {
				return true
			}
		}
	}
	return false
}
