package core

import "time"

// NodeHealth is the recorded health of one node. Replicas share it through
// the store and a restart keeps it (DESIGN.md, invariant 9): a node that
// failed stays out of placement until it is known to have recovered,
// whichever replica learns of what. A node with no record is healthy.
type NodeHealth struct {
	Node   string
	Health Health
	// Reason says why the node is unhealthy ("GPU 3: XID 79", "drained
	// by ops"); empty when healthy.
	Reason string
	// Since is when the node entered this health.
	Since time.Time
	// Source is who said so, so that an operator's word is not undone by
	// the engine's next report (the service decides how they combine).
	Source HealthSource
}

// HealthSource says who recorded a node's health.
type HealthSource string

const (
	// HealthFromEngine is a report of the backend: NVML, a Kubernetes
	// node's conditions, a Slurm node's state.
	HealthFromEngine HealthSource = "engine"
	// HealthFromAdmin is an administrator's fail or recover.
	HealthFromAdmin HealthSource = "admin"
)

// Valid reports whether s is one of the sources above.
func (s HealthSource) Valid() bool { return s == HealthFromEngine || s == HealthFromAdmin }
