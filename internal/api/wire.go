package api

import (
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// The *JSON types are the wire shapes of API.md. They are separate from
// core's types so that the contract changes only on purpose; the schema
// namer drops the suffix, so the OpenAPI document calls them Block, Money, ...

// moneyJSON is an amount of integer minor units rendered as a decimal string.
type moneyJSON struct {
	Amount   string `json:"amount" example:"1234.56" doc:"Decimal amount; never a float."`
	Currency string `json:"currency" example:"USD"`
}

func toMoney(m core.Money) moneyJSON {
	return moneyJSON{Amount: m.String(), Currency: m.Currency}
}

type blockJSON struct {
	ID            string            `json:"id" example:"cb-01HZX"`
	Name          string            `json:"name"`
	Team          string            `json:"team"`
	InstanceType  string            `json:"instanceType" example:"h100.8x"`
	GPUModel      string            `json:"gpuModel" example:"H100"`
	InstanceCount int               `json:"instanceCount" example:"2"`
	Zone          string            `json:"zone" example:"zone-a"`
	StartTime     time.Time         `json:"startTime"`
	EndTime       time.Time         `json:"endTime"`
	DurationHours int               `json:"durationHours" example:"48"`
	State         string            `json:"state" enum:"payment-pending,scheduled,active,expired,payment-failed,cancelled,failed"`
	UpfrontFee    moneyJSON         `json:"upfrontFee"`
	CreatedAt     time.Time         `json:"createdAt"`
	Tags          map[string]string `json:"tags"`
	PlanID        string            `json:"planId,omitempty" doc:"The training plan the block is a segment of."`
	Lending       bool              `json:"lending,omitempty" doc:"The holder lends the block's GPUs to backfill while running no job on them (POST /v1/blocks/{id}/lending)."`
}

func toBlock(b core.Block) blockJSON {
	return blockJSON{
		ID:            b.ID,
		Name:          b.Name,
		Team:          b.Team,
		InstanceType:  b.InstanceType,
		GPUModel:      b.GPUModel,
		InstanceCount: b.Count,
		Zone:          b.Zone,
		StartTime:     b.Start.UTC(),
		EndTime:       b.End.UTC(),
		DurationHours: b.DurationHours(),
		State:         string(b.State),
		UpfrontFee:    toMoney(b.Fee),
		CreatedAt:     b.CreatedAt.UTC(),
		Tags:          orEmpty(b.Tags),
		PlanID:        b.PlanID,
		Lending:       b.Lending,
	}
}

type blocksJSON struct {
	Blocks []blockJSON `json:"blocks" nullable:"false"`
}

type offeringJSON struct {
	OfferingID    string    `json:"offeringId" example:"cbo-eyJrIjoiY2JvIn0.c2ln"`
	InstanceType  string    `json:"instanceType" example:"h100.8x"`
	InstanceCount int       `json:"instanceCount" example:"2"`
	Zone          string    `json:"zone" example:"zone-a"`
	StartTime     time.Time `json:"startTime"`
	EndTime       time.Time `json:"endTime"`
	DurationHours int       `json:"durationHours" example:"48"`
	UpfrontFee    moneyJSON `json:"upfrontFee"`
	OnDemandFee   moneyJSON `json:"onDemandFee" doc:"What the same instance-hours cost on demand."`
	ExpiresAt     time.Time `json:"expiresAt" doc:"The quote cannot be bought after this time."`
	Alternative   bool      `json:"alternative" doc:"True for an offering of another duration than the one asked for (slightly shorter or longer), listed after those of the duration asked for."`
}

type offeringsJSON struct {
	Offerings []offeringJSON `json:"offerings" doc:"Best first; empty when nothing fits." nullable:"false"`
}

func toOfferings(os []core.Offering) offeringsJSON {
	out := offeringsJSON{Offerings: make([]offeringJSON, 0, len(os))}
	for _, o := range os {
		out.Offerings = append(out.Offerings, offeringJSON{
			OfferingID:    o.ID,
			InstanceType:  o.InstanceType,
			InstanceCount: o.Count,
			Zone:          o.Zone,
			StartTime:     o.Start.UTC(),
			EndTime:       o.End.UTC(),
			DurationHours: o.DurationHours(),
			UpfrontFee:    toMoney(o.Fee),
			OnDemandFee:   toMoney(o.OnDemandFee),
			ExpiresAt:     o.ExpiresAt.UTC(),
			Alternative:   o.Alternative,
		})
	}
	return out
}

type placementJSON struct {
	Node string `json:"node"`
	GPUs []int  `json:"gpus" doc:"GPU indexes on the node." nullable:"false"`
}

type blockStatusJSON struct {
	TotalCapacity       int             `json:"totalCapacity"`
	AvailableCapacity   int             `json:"availableCapacity"`
	UnavailableCapacity int             `json:"unavailableCapacity" doc:"Instances on nodes that failed health checks."`
	Degraded            bool            `json:"degraded" doc:"A failed node could not be replaced."`
	PlacementFinal      bool            `json:"placementFinal" doc:"False while a scheduled block may still move (before lockInTime)."`
	LockInTime          time.Time       `json:"lockInTime"`
	Placements          []placementJSON `json:"placements" nullable:"false"`
	Actions             []actionJSON    `json:"actions" nullable:"false" doc:"The engine actions that make the block real (activate at its start, terminate its workloads before its end, release at its end or cancellation), in the order they were decided; those done over a week ago are pruned."`
}

type actionJSON struct {
	ID            string     `json:"id" example:"ac-cb-01HZX-2-activate"`
	Kind          string     `json:"kind" enum:"activate,terminate,release,start-instance,stop-instance"`
	State         string     `json:"state" enum:"pending,done,failed" doc:"pending: waiting for the engine (due, retrying, or after an earlier action); done: the engine took it; failed: given up on, an operator must look."`
	Attempts      int        `json:"attempts" doc:"Failed tries so far."`
	LastError     string     `json:"lastError,omitempty" doc:"Why the last try failed; shown to admins only."`
	CreatedAt     time.Time  `json:"createdAt"`
	NextAttemptAt *time.Time `json:"nextAttemptAt,omitempty" doc:"When a pending action is tried next."`
	DoneAt        *time.Time `json:"doneAt,omitempty" doc:"When the action was done, or given up on."`
}

func toBlockStatus(s contract.BlockStatus) blockStatusJSON {
	out := blockStatusJSON{
		TotalCapacity:       s.Total,
		AvailableCapacity:   s.Available,
		UnavailableCapacity: s.Unavailable,
		Degraded:            s.Degraded,
		PlacementFinal:      s.PlacementFinal,
		LockInTime:          s.LockInTime.UTC(),
		Placements:          make([]placementJSON, 0, len(s.Placements)),
	}
	for _, p := range s.Placements {
		gpus := p.GPUs
		if gpus == nil {
			gpus = []int{}
		}
		out.Placements = append(out.Placements, placementJSON{Node: p.Node, GPUs: gpus})
	}
	out.Actions = make([]actionJSON, 0, len(s.Actions))
	for _, a := range s.Actions {
		aj := actionJSON{ID: a.ID, Kind: string(a.Kind), State: string(a.State), Attempts: a.Attempts,
			LastError: a.LastError, CreatedAt: a.CreatedAt.UTC()}
		if a.State == core.ActionPending {
			next := a.NextAt.UTC()
			aj.NextAttemptAt = &next
		}
		if !a.DoneAt.IsZero() {
			done := a.DoneAt.UTC()
			aj.DoneAt = &done
		}
		out.Actions = append(out.Actions, aj)
	}
	return out
}

type instanceTypeJSON struct {
	Name            string    `json:"name" example:"h100.8x"`
	GPUModel        string    `json:"gpuModel" example:"H100"`
	GPUsPerInstance int       `json:"gpusPerInstance" example:"8"`
	OnDemandPrice   moneyJSON `json:"onDemandPrice" doc:"Per instance-hour."`
	Zones           []string  `json:"zones" nullable:"false"`
	// AWSNames are the names the AWS fronts take for the type
	// (p5.48xlarge, ml.p5.48xlarge), for a client to map them as /aws does.
	AWSNames []string `json:"awsNames,omitempty" example:"p5.48xlarge"`
}

type instanceTypesJSON struct {
	InstanceTypes []instanceTypeJSON `json:"instanceTypes" nullable:"false"`
}

type nodeJSON struct {
	Name     string            `json:"name"`
	Zone     string            `json:"zone"`
	Rack     string            `json:"rack"`
	GPUModel string            `json:"gpuModel"`
	GPUs     int               `json:"gpus"`
	Health   string            `json:"health" enum:"healthy,unhealthy"`
	Labels   map[string]string `json:"labels"`
	nodeHealthJSON
}

type nodesJSON struct {
	Nodes []nodeJSON `json:"nodes" nullable:"false"`
}

type slotJSON struct {
	Start time.Time `json:"start"`
	Free  int       `json:"free" doc:"Free instances of the type during this hour."`
}

type slotsJSON struct {
	Slots []slotJSON `json:"slots" nullable:"false"`
}

type eventJSON struct {
	ID      string         `json:"id" example:"evt-1"`
	Time    time.Time      `json:"time"`
	Type    string         `json:"type" example:"block.active"`
	Subject string         `json:"subject" example:"cb-01HZX"`
	Team    string         `json:"team"`
	Data    map[string]any `json:"data"`
}

type eventsJSON struct {
	Events []eventJSON `json:"events" nullable:"false"`
	Next   string      `json:"next" doc:"Cursor to pass as after next time."`
}

func toEvents(events []core.Event, next string) eventsJSON {
	out := eventsJSON{Events: make([]eventJSON, 0, len(events)), Next: next}
	for _, e := range events {
		data := e.Data
		if data == nil {
			data = map[string]any{}
		}
		out.Events = append(out.Events, eventJSON{
			ID: e.ID, Time: e.Time.UTC(), Type: e.Type, Subject: e.Subject, Team: e.Team, Data: data,
		})
	}
	return out
}

// orEmpty renders a nil map as {} rather than null.
func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// optionalTime is t in UTC for an optional time field: nil (absent) when
// t is zero.
func optionalTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
