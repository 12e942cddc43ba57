package client

import "time"

// Money is an amount as the API writes it: a decimal string and a currency.
type Money struct {
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

// String renders "98.32 USD".
func (m Money) String() string {
	if m.Currency == "" {
		return m.Amount
	}
	return m.Amount + " " + m.Currency
}

// InstanceType is what is sold; OnDemandPrice is per instance-hour.
type InstanceType struct {
	Name            string   `json:"name"`
	GPUModel        string   `json:"gpuModel"`
	GPUsPerInstance int      `json:"gpusPerInstance"`
	OnDemandPrice   Money    `json:"onDemandPrice"`
	Zones           []string `json:"zones"`
	// AWSNames are the names the AWS fronts take for the type
	// (p5.48xlarge, ml.p5.48xlarge); none when the operator gave none.
	AWSNames []string `json:"awsNames,omitempty"`
}

// Node is one GPU host of the fleet.
type Node struct {
	Name         string            `json:"name"`
	Zone         string            `json:"zone"`
	Rack         string            `json:"rack"`
	GPUModel     string            `json:"gpuModel"`
	GPUs         int               `json:"gpus"`
	Health       string            `json:"health"`
	HealthReason string            `json:"healthReason,omitempty"`
	HealthSince  *time.Time        `json:"healthSince,omitempty"`
	HealthSource string            `json:"healthSource,omitempty"`
	Labels       map[string]string `json:"labels"`
}

// NodeReport is what a node's fail or recover did: its health record
// and the blocks moved, left short, or whole again.
type NodeReport struct {
	Node         string     `json:"node"`
	Health       string     `json:"health"`
	HealthReason string     `json:"healthReason,omitempty"`
	HealthSince  *time.Time `json:"healthSince,omitempty"`
	HealthSource string     `json:"healthSource,omitempty"`
	Replaced     []string   `json:"replaced"`
	Degraded     []string   `json:"degraded"`
	Recovered    []string   `json:"recovered"`
}

// Offering is a priced, time-limited quote for a block or an extension.
type Offering struct {
	OfferingID    string    `json:"offeringId"`
	InstanceType  string    `json:"instanceType"`
	InstanceCount int       `json:"instanceCount"`
	Zone          string    `json:"zone"`
	StartTime     time.Time `json:"startTime"`
	EndTime       time.Time `json:"endTime"`
	DurationHours int       `json:"durationHours"`
	UpfrontFee    Money     `json:"upfrontFee"`
	OnDemandFee   Money     `json:"onDemandFee"`
	ExpiresAt     time.Time `json:"expiresAt"`
	// Alternative is true for an offering of another duration than the
	// one asked for, listed after those of the duration asked for.
	Alternative bool `json:"alternative"`
}

// Block is a purchased reservation.
type Block struct {
	ID            string            `json:"id"`
	Name          string            `json:"name"`
	Team          string            `json:"team"`
	InstanceType  string            `json:"instanceType"`
	GPUModel      string            `json:"gpuModel"`
	InstanceCount int               `json:"instanceCount"`
	Zone          string            `json:"zone"`
	StartTime     time.Time         `json:"startTime"`
	EndTime       time.Time         `json:"endTime"`
	DurationHours int               `json:"durationHours"`
	State         string            `json:"state"`
	UpfrontFee    Money             `json:"upfrontFee"`
	CreatedAt     time.Time         `json:"createdAt"`
	Tags          map[string]string `json:"tags"`
	PlanID        string            `json:"planId,omitempty"`  // the plan it is a segment of
	Lending       bool              `json:"lending,omitempty"` // lends its idle GPUs to backfill
	// Handovers and Utilisation come with GET /v1/blocks/{id} only.
	Handovers   []Handover `json:"handovers,omitempty"`
	Utilisation *GPUHours  `json:"utilisation,omitempty"`
}

// Placement is the GPUs of one node that a block holds.
type Placement struct {
	Node string `json:"node"`
	GPUs []int  `json:"gpus"`
}

// BlockStatus is a block's capacity and placement. Placements of a
// scheduled block may still move until LockInTime.
type BlockStatus struct {
	TotalCapacity       int         `json:"totalCapacity"`
	AvailableCapacity   int         `json:"availableCapacity"`
	UnavailableCapacity int         `json:"unavailableCapacity"`
	Degraded            bool        `json:"degraded"`
	PlacementFinal      bool        `json:"placementFinal"`
	LockInTime          time.Time   `json:"lockInTime"`
	Placements          []Placement `json:"placements"`
}

// Event records one state change of a block, plan or job.
type Event struct {
	ID      string         `json:"id"`
	Time    time.Time      `json:"time"`
	Type    string         `json:"type"`
	Subject string         `json:"subject"`
	Team    string         `json:"team"`
	Data    map[string]any `json:"data"`
}

// EventPage is one answer of the events long poll; Next is the cursor to
// pass as After next time.
type EventPage struct {
	Events []Event `json:"events"`
	Next   string  `json:"next"`
}

// OfferingsQuery is a search for block offerings. Either DurationHours or
// MinDurationHours/MaxDurationHours is set; zero times and values are left
// to the server's defaults.
type OfferingsQuery struct {
	InstanceTypes    []string
	InstanceCount    int
	DurationHours    int
	MinDurationHours int
	MaxDurationHours int
	StartAfter       time.Time
	EndBefore        time.Time
	Zone             string
	MaxResults       int
	// Team (an administrator's choice, its id) bounds the offerings by
	// that team's quota, as its purchase would be bounded.
	Team string
}

// BuyRequest is the body of POST /v1/blocks. The same ClientToken makes a
// retry return the same block instead of buying twice.
type BuyRequest struct {
	OfferingID  string            `json:"offeringId"`
	ClientToken string            `json:"clientToken"`
	Name        string            `json:"name,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
	// Team is the team an admin buys for; empty means the caller's own.
	Team string `json:"team,omitempty"`
}

// Clock is the server's simulated clock.
type Clock struct {
	Now time.Time `json:"now"`
}

// Team is a group of users that owns blocks, quotas and a budget.
type Team struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	CreatedAt  time.Time  `json:"createdAt"`
	DisabledAt *time.Time `json:"disabledAt,omitempty"`
}

// Quota limits a team's purchases, for every instance type (InstanceType
// empty) or one. A zero limit means the operator's default.
type Quota struct {
	InstanceType         string `json:"instanceType,omitempty"`
	MaxInstancesPerBlock int    `json:"maxInstancesPerBlock"`
	MaxInstancesHeld     int    `json:"maxInstancesHeld"`
	MaxDurationHours     int    `json:"maxDurationHours"`
	MaxLeadDays          int    `json:"maxLeadDays"`
}

// Budget caps a team's net spend per Period: "month", "total" or "none".
type Budget struct {
	Amount Money  `json:"amount"`
	Period string `json:"period"`
}

// LedgerEntry is one charge or refund of a team.
type LedgerEntry struct {
	ID        string    `json:"id"`
	JournalID string    `json:"journalId"`
	Seq       int64     `json:"seq"`
	Time      time.Time `json:"time"`
	Kind      string    `json:"kind"` // "charge", "refund" or "credit"
	Amount    Money     `json:"amount"`
	Subject   string    `json:"subject"` // the block (or job) the line is about
}

// Cash is what moved through a team's wallet: Gross charged, Refunds and
// Credits received, Net = Gross - Refunds - Credits.
type Cash struct {
	Gross   Money `json:"gross,omitzero"`
	Refunds Money `json:"refunds,omitzero"`
	Credits Money `json:"credits,omitzero"`
	Net     Money `json:"net,omitzero"`
}

// Ledger is a team's charges, refunds and credits, what its budget
// counts in the current period, what moved in all, and its budget (nil
// when it has none).
type Ledger struct {
	Entries []LedgerEntry `json:"entries"`
	Spent   Money         `json:"spent"`
	Cash
	Budget *Budget `json:"budget,omitempty"`
}

// Roles of API.md.
const (
	RoleAdmin  = "admin"
	RoleMember = "member"
	RoleViewer = "viewer"
)

// User is a person or robot of a team, with a role.
type User struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Team       string     `json:"team"`
	Role       string     `json:"role"`
	CreatedAt  time.Time  `json:"createdAt"`
	DisabledAt *time.Time `json:"disabledAt,omitempty"`
}

// NewUser is the body of POST /v1/users.
type NewUser struct {
	Name string `json:"name"`
	Team string `json:"team"`
	Role string `json:"role"`
}

// Token describes an API token; the secret itself is only in NewToken.
type Token struct {
	ID        string     `json:"id"`
	User      string     `json:"user"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
}

// NewToken is a token just created; Secret is shown this once.
type NewToken struct {
	Token
	Secret string `json:"token"`
}

// AccessKey describes an AWS-style access key; the secret itself is only
// in NewAccessKey.
type AccessKey struct {
	ID          string     `json:"id"`
	AccessKeyID string     `json:"accessKeyId"`
	User        string     `json:"user"`
	Team        string     `json:"team"`
	CreatedAt   time.Time  `json:"createdAt"`
	RevokedAt   *time.Time `json:"revokedAt,omitempty"`
}

// NewAccessKey is an access key just created; SecretAccessKey is shown
// this once.
type NewAccessKey struct {
	AccessKey
	SecretAccessKey string `json:"secretAccessKey"`
}

// AuditRecord is one mutating request: who, with which token, what, and
// the outcome ("ok" or a problem code).
type AuditRecord struct {
	Seq     int64     `json:"seq"`
	Time    time.Time `json:"time"`
	User    string    `json:"user"`
	Team    string    `json:"team"`
	TokenID string    `json:"tokenId"`
	Method  string    `json:"method"`
	Route   string    `json:"route"`
	Subject string    `json:"subject,omitempty"`
	Status  int       `json:"status"`
	Outcome string    `json:"outcome"`
}

// AuditPage is one answer of GET /v1/audit; Next is the cursor to pass as
// after next time.
type AuditPage struct {
	Records []AuditRecord `json:"records"`
	Next    string        `json:"next"`
}

// SpendQuery selects spend rows: one team (all the caller may see when
// empty) and months From..To, written "2026-12" (open when empty).
type SpendQuery struct {
	Team string
	From string
	To   string
}

// SpendRow is, for a team, one instance type and one month, what moved
// through its wallet (Cash), what the hours it held cost (Spent), what
// the same hours would have cost on demand, and the difference.
type SpendRow struct {
	Team         string `json:"team"`
	InstanceType string `json:"instanceType"`
	Month        string `json:"month"` // "2026-12"
	Cash
	Spent    Money `json:"spent"`
	OnDemand Money `json:"onDemand"`
	Savings  Money `json:"savings"`
	// GPUHours is what became of the GPU-hours reserved in the month.
	GPUHours GPUHours `json:"gpuHours"`
}

// SpendTotal sums the rows of a Spend.
type SpendTotal struct {
	Cash
	Spent    Money    `json:"spent"`
	OnDemand Money    `json:"onDemand"`
	Savings  Money    `json:"savings"`
	GPUHours GPUHours `json:"gpuHours"`
}

// Spend is the answer of GET /v1/spend.
type Spend struct {
	Rows  []SpendRow `json:"rows"`
	Total SpendTotal `json:"total"`
}
