package core

import (
	"fmt"
	"time"
)

// Spot work under a budget. A team's spot runs are charged when they
// end, so its ledger alone says too little: what its budget has left for
// them is the budget's limit, less the net spend in the ledger since the
// period began, less what its runs have accrued and not been charged
// yet. A preemptible job is created, and started, only while that pays
// for its minimum run (SpotMinimumRun of its instances at the spot
// price); a running one is preempted, with the notice of a block's
// preemption, so that it is gone when the money runs out (RunsOutAt).

// SpotMinimumRun is the least spot time a team's budget must pay for
// when one of its preemptible jobs is created or started.
const SpotMinimumRun = time.Hour

// SpotHourBP is what an hour of count instances of t costs at the spot
// price, in ten-thousandths of a minor unit: exact, where SpotCharge
// rounds to the minor unit.
func SpotHourBP(count int, t InstanceType, p Pricing) int64 {
	return t.OnDemand.Minor * p.SpotBP * int64(count)
}

// SpotMinimum is what SpotMinimumRun of count instances of t costs at the
// spot price, rounded to the minor unit.
func SpotMinimum(count int, t InstanceType, p Pricing) Money {
	bp := SpotHourBP(count, t, p) * int64(SpotMinimumRun/time.Second) / 3600
	return Money{Minor: (bp + 5000) / 10000, Currency: t.OnDemand.Currency}
}

// SpotBudget is a team's budget as its spot work sees it at one moment.
type SpotBudget struct {
	Team string
	// Left is what the budget has left, in minor units: its limit less the
	// net spend since the period began and what the team's spot runs
	// accrued and were not charged yet. Negative when over.
	Left     int64
	Currency string
	// HourBP is what the team's spot runs cost an hour (SpotHourBP).
	HourBP int64
}

// Accrue counts a spot run of the team's that is not charged yet: what it
// cost from its start to now comes off Left, its cost an hour onto HourBP.
func (b *SpotBudget) Accrue(run Job, t InstanceType, p Pricing, now time.Time) {
	b.Left -= SpotCharge(run, t, p, now).Minor
	b.HourBP += SpotHourBP(run.InstanceCount, t, p)
}

// Afford says whether what is left pays for the minimum run of count
// instances of t: nil, or an error wrapping ErrBudgetExceeded that says
// what is left and what is needed.
func (b SpotBudget) Afford(count int, t InstanceType, p Pricing) error {
	need := SpotMinimum(count, t, p)
	if b.Left >= need.Minor {
		return nil
	}
	return fmt.Errorf("%w: team %s has %s %s of its budget left for spot time; %d %s cost %s %s for the first %s at the spot price",
		ErrBudgetExceeded, b.Team, Money{Minor: max(b.Left, 0)}, b.Currency, count, t.Name, need, need.Currency, fmtHours(SpotMinimumRun))
}

// maxRunsOut bounds RunsOutAt, so that a budget large for its runs never
// overflows a duration.
const maxRunsOut = 100 * 365 * 24 * time.Hour

// RunsOutAt is when the team's spot runs, at what they cost an hour, have
// spent what is left: now when nothing is; zero when they cost nothing.
func (b SpotBudget) RunsOutAt(now time.Time) time.Time {
	if b.HourBP <= 0 {
		return time.Time{}
	}
	if b.Left <= 0 {
		return now
	}
	secs := b.Left * 10000 / b.HourBP * 3600 // minor units × bp / bp-per-hour, in seconds
	if rest := b.Left * 10000 % b.HourBP; rest > 0 {
		secs += rest * 3600 / b.HourBP
	}
	if secs > int64(maxRunsOut/time.Second) {
		return now.Add(maxRunsOut)
	}
	return now.Add(time.Duration(secs) * time.Second)
}
