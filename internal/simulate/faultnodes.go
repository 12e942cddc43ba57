package simulate

import (
	"context"
	"maps"
	"slices"

	"capblock/internal/backend"
	"capblock/internal/core"
)

// Nodes failing and recovering at the engine. The engine reports its
// nodes' health (backend.HealthReporter, as Kubernetes' NotReady or a
// Slurm node down); the leader's engine watch reads it at each pass
// (LeadOnce) and records what changed through the path of an admin's
// fail and recover, from the engine: the failed node's blocks get
// replacements, and a node the engine recovers is healthy again, unless
// an admin failed it. The service learns of a change only at the next
// pass, and a pass that meets a fault learns it at a later one; so the
// health stored between passes is checked by who recorded it: a record
// of the admin's is what the admin's last acknowledged change made it,
// and a record of the engine's is on a node the admin left healthy
// (engineSays). Once the world is quiet, the health stored is the
// engine's word over the admin's (checkEngineHealth).

// engineReason is why the engine says a node failed.
const engineReason = "NotReady (simulated)"

// maxEngineDown is how many nodes may be down at the engine at once.
const maxEngineDown = 2

var _ backend.HealthReporter = (*faultEngine)(nil)

// NodeHealth reports the nodes the engine says failed.
func (e *faultEngine) NodeHealth(context.Context) ([]core.NodeHealth, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []core.NodeHealth
	for _, n := range slices.Sorted(maps.Keys(e.down)) {
		out = append(out, core.NodeHealth{Node: n, Health: core.Unhealthy, Reason: engineReason})
	}
	return out, nil
}

// setDown makes the engine say node n failed (true) or is healthy.
func (e *faultEngine) setDown(n string, down bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if down {
		e.down[n] = true
	} else {
		delete(e.down, n)
	}
}

// downNodes are the nodes the engine says failed.
func (e *faultEngine) downNodes() map[string]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.down)
}

// opEngineNode fails a node at the engine, or recovers one it failed.
func (w *world) opEngineNode() {
	n := w.fleet.Nodes[w.rng.IntN(len(w.fleet.Nodes))].Name
	down := w.engine.downNodes()
	if !down[n] && len(down) >= maxEngineDown {
		n = slices.Sorted(maps.Keys(down))[0]
	}
	w.begin("engine: node %s %s", n, map[bool]string{true: "recovers", false: "fails"}[down[n]])
	w.count("enginenode")
	w.engine.setDown(n, !down[n])
}

// engineSays reports whether a node's stored record may differ from the
// admin's last acknowledged word (want) because the engine recorded it:
// the engine fails and recovers only a node the admin left healthy.
func engineSays(rec core.NodeHealth, want core.Health) bool {
	return rec.Source == core.HealthFromEngine && want == core.Healthy
}

// checkEngineHealth checks, once the world is quiet and the leader's
// passes read the engine, that each node is stored unhealthy where the
// engine or the admin says it failed, and healthy elsewhere. An engine
// that does not report health (a mutant that hides it) is not checked.
func (w *world) checkEngineHealth() {
	if _, reports := w.backend.(backend.HealthReporter); !reports {
		return
	}
	recs, err := w.st.NodeHealth(w.ctx)
	if err != nil {
		w.fail("reading the node health: %v", err)
	}
	stored := map[string]core.NodeHealth{}
	for _, r := range recs {
		stored[r.Node] = r
	}
	down := w.engine.downNodes()
	for _, n := range w.fleet.Nodes {
		want := core.Healthy
		if down[n.Name] || w.m.health[n.Name] == core.Unhealthy {
			want = core.Unhealthy
		}
		got := stored[n.Name].Health
		if got == "" {
			got = core.Healthy
		}
		if got != want {
			w.fail("node %s is stored %s (from %s); the engine says it failed: %v, the admin's last word made it %q",
				n.Name, got, stored[n.Name].Source, down[n.Name], w.m.health[n.Name])
		}
	}
}
