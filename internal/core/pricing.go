package core

import "sort"

// Pricing sets how a block's upfront fee follows supply, demand and lead
// time. Factors are in basis points of the on-demand price (10000 = 1.0).
//
//	factor = Base + Utilization × bookedShare − LeadDiscount × lead / MaxLeadTime
//	factor = min(Cap, max(Floor, factor))
//	fee    = round(onDemand × factor / 10000) × hours × count
//
// bookedShare is the fraction of the GPU-hours of the instance type's pool
// (GPU model and zone) already booked over the offered window; lead is the
// time from now to the start. Integer arithmetic keeps it deterministic.
type Pricing struct {
	FloorBP        int64
	CapBP          int64
	BaseBP         int64
	UtilizationBP  int64
	LeadDiscountBP int64
	// SpotBP is the price of preemptible (backfill) work, per GPU-hour
	// used, in basis points of the instance type's on-demand price.
	SpotBP int64
}

// DefaultPricing: 0.75 × on-demand on an empty fleet bought at once, up to
// 1.0 when the pool is full, down to 0.55 for an empty pool 8 weeks ahead.
func DefaultPricing() Pricing {
	return Pricing{FloorBP: 5000, CapBP: 10000, BaseBP: 7500, UtilizationBP: 4000, LeadDiscountBP: 2000, SpotBP: 3000}
}

// Factor returns the price factor in basis points for a booked share
// (bookedBP, basis points of the pool's GPU-hours over the window) and a
// lead time expressed as leadHours out of maxLeadHours.
func (p Pricing) Factor(bookedBP, leadHours, maxLeadHours int64) int64 {
	f := p.BaseBP + p.UtilizationBP*bookedBP/10000
	if maxLeadHours > 0 {
		lead := min(max(leadHours, 0), maxLeadHours)
		f -= p.LeadDiscountBP * lead / maxLeadHours
	}
	return min(p.CapBP, max(p.FloorBP, f))
}

// Fee is the upfront fee of count instances for hours at factorBP of the
// hourly on-demand price.
func (p Pricing) Fee(onDemand Money, factorBP int64, hours, count int) Money {
	hourly := (onDemand.Minor*factorBP + 5000) / 10000
	return Money{Minor: hourly * int64(hours) * int64(count), Currency: onDemand.Currency}
}

// OnDemandFee is what the same instance-hours cost on demand.
func OnDemandFee(onDemand Money, hours, count int) Money {
	return Money{Minor: onDemand.Minor * int64(hours) * int64(count), Currency: onDemand.Currency}
}

func sortStrings(s []string) { sort.Strings(s) }
