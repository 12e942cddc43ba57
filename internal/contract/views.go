package contract

import (
	"time"

	"capblock/internal/core"
)

// BlockStatus is the capacity and placement of a block, and the engine
// actions that make it real (GET /v1/blocks/{id}/status in the REST API).
type BlockStatus struct {
	Total          int
	Available      int
	Unavailable    int
	Degraded       bool
	PlacementFinal bool
	LockInTime     time.Time
	Placements     []core.Placement
	// Actions are the block's engine actions in the order they were
	// decided, those done over a week ago excepted. Their LastError is
	// shown to admins only: a backend's error may name the machinery
	// behind it (addresses, commands, their output). Their Payload is
	// not set.
	Actions []core.Action
}

// Extension is an extension of a block bought with an extension
// offering: the hours it added, [Start, End) (the block's end before and
// after), the fee charged for them, when it was bought (to the second, as
// stored), and the block as it stands now. Buying the same offering again
// answers the same extension.
type Extension struct {
	Block       core.Block
	OfferingID  string
	Start, End  time.Time
	Fee         core.Money
	PurchasedAt time.Time
}

// PlanView is a plan with what is derived from its segments when read:
// its state and its capacity now.
type PlanView struct {
	Plan     core.Plan
	State    core.PlanState
	Capacity core.PlanCapacity
}

// NodeReport says what a node's health change did to the blocks on it.
type NodeReport struct {
	Node   string
	Health core.Health
	// Record is the node's health record after the change (zero Since
	// when the node was never recorded: it is healthy).
	Record    core.NodeHealth
	Replaced  []string // blocks moved to replacement GPUs
	Degraded  []string // blocks left short: no replacement free
	Recovered []string // degraded blocks whole again
}

// NodeView is a node with its health now (Node.Health) and the record
// that says since when, why and who said so; a node never recorded is
// healthy and its Record is zero.
type NodeView struct {
	Node   core.Node
	Record core.NodeHealth
}

// LedgerView is a team's ledger with its spend in the current budget
// period (all time without a budget; what the budget counts), what
// moved through its wallet in all, and its budget, when set.
type LedgerView struct {
	Entries []core.LedgerEntry
	Spent   core.Money
	Cash    Cash
	Budget  *core.Budget
}

// Cash is what moved through a team's wallet: Gross charged, Refunds of
// it and Credits (income from others) received, and Net, what the team
// is out of pocket: Gross less Refunds less Credits.
type Cash struct {
	Gross, Refunds, Credits, Net core.Money
}

// ZeroCash is Cash of nothing in currency.
func ZeroCash(currency string) Cash {
	z := core.Money{Currency: currency}
	return Cash{Gross: z, Refunds: z, Credits: z, Net: z}
}

// Add counts a ledger line.
func (c *Cash) Add(e core.LedgerEntry) {
	switch e.Kind {
	case core.LedgerCharge:
		c.Gross.Minor += e.Amount.Minor
		c.Net.Minor += e.Amount.Minor
	case core.LedgerRefund:
		c.Refunds.Minor += e.Amount.Minor
		c.Net.Minor -= e.Amount.Minor
	case core.LedgerCredit:
		c.Credits.Minor += e.Amount.Minor
		c.Net.Minor -= e.Amount.Minor
	}
}

// SpendRow is what one team spent on one type in one month: what moved
// through its wallet (Cash), what the hours it held cost (Spent: the cost
// of hours follows them when they are handed on) and what the same
// instance-hours cost on demand.
type SpendRow struct {
	Team         string
	InstanceType string
	Month        string // YYYY-MM
	Cash         Cash
	Spent        core.Money
	OnDemand     core.Money
	// GPUHours is what became of the team's reserved GPU-hours of the
	// type in the month (see Utilisation).
	GPUHours GPUHours
}

// GPUHours is what became of reserved GPU time, in GPU-hours: Reserved
// over the hours elapsed, Used by the holder's jobs, Lent to backfill,
// Idle the rest (core.Utilisation).
type GPUHours struct {
	Reserved, Used, Lent, Idle float64
}

// GPUHoursOf converts a utilisation to GPU-hours.
func GPUHoursOf(u core.Utilisation) GPUHours {
	return GPUHours{core.Hours(u.Reserved), core.Hours(u.Used), core.Hours(u.Lent), core.Hours(u.Idle)}
}

// UtilisationRow is the utilisation of one block, plan or team: the keys
// that do not apply are empty.
type UtilisationRow struct {
	Team         string
	BlockID      string
	PlanID       string
	InstanceType string
	GPUHours     GPUHours
}

// UtilisationReport is the utilisation of a team's blocks (every team's
// for an admin) over a window, per block, per plan and per team, and in
// total.
type UtilisationReport struct {
	From, To time.Time
	Blocks   []UtilisationRow
	Plans    []UtilisationRow
	Teams    []UtilisationRow
	Total    GPUHours
}

// Handover is a block's hours handed on: to another team (kind
// "transfer") or released for resale ("release"), with what has been
// resold and credited so far. Team and ToTeam are shown only to the
// teams they name (and admins).
type Handover struct {
	ID             string
	Kind           string
	BlockID        string
	Team           string
	ToTeam         string
	ToBlockID      string
	From, Until    time.Time
	GPUHours       int64
	Price          core.Money
	FeePercent     int
	ResoldGPUHours int64
	Credited       core.Money
	CreatedAt      time.Time
}

// HandOnResult is what a transfer or a release did: the holder's block
// as it is now, the block the receiving team got (a transfer), and the
// hand-over.
type HandOnResult struct {
	Block    core.Block
	Received *core.Block
	Handover Handover
}

// BlockDetail is what a block's own page shows beyond the block: its
// hand-overs, given or received, and its utilisation so far.
type BlockDetail struct {
	Handovers   []Handover
	Utilisation GPUHours
}

// SpendReport is the rows and their total (whose keys are empty).
type SpendReport struct {
	Rows  []SpendRow
	Total SpendRow
}
