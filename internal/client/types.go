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
}

// Node is one GPU host of the fleet.
type Node struct {
	Name     string            `json:"name"`
	Zone     string            `json:"zone"`
	Rack     string            `json:"rack"`
	GPUModel string            `json:"gpuModel"`
	GPUs     int               `json:"gpus"`
	Health   string            `json:"health"`
	Labels   map[string]string `json:"labels"`
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
}

// BuyRequest is the body of POST /v1/blocks. The same ClientToken makes a
// retry return the same block instead of buying twice.
type BuyRequest struct {
	OfferingID  string            `json:"offeringId"`
	ClientToken string            `json:"clientToken"`
	Name        string            `json:"name,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
}

// Clock is the server's simulated clock.
type Clock struct {
	Now time.Time `json:"now"`
}
