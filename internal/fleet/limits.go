package fleet

import (
	"fmt"
	"time"

	"capblock/internal/core"
	"capblock/internal/humantime"
)

// limits applies the file's limits over core.DefaultLimits and checks that
// the result is coherent. A problem involving two keys is reported at the
// one the file sets (the other kept its default).
func (c *checker) limits(fl fileLimits) core.Limits {
	l := core.DefaultLimits()
	const where = "limits"
	dur := func(key, text string, dst *time.Duration) {
		if text == "" {
			return
		}
		d, err := humantime.ParseDuration(text)
		if err != nil {
			c.addf("$.limits."+key, where, "%s %q is not a duration; write it like 30m, 48h, 3d or 8w", key, text)
			return
		}
		*dst = d
	}
	num := func(n number, dst *int) {
		if n.set {
			*dst = n.v
		}
	}
	num(fl.MaxInstancesPerBlock, &l.MaxInstancesPerBlock)
	dur("minDuration", fl.MinDuration, &l.MinDuration)
	dur("maxDuration", fl.MaxDuration, &l.MaxDuration)
	dur("minLeadTime", fl.MinLeadTime, &l.MinLeadTime)
	dur("maxLeadTime", fl.MaxLeadTime, &l.MaxLeadTime)
	dur("horizon", fl.Horizon, &l.Horizon)
	dur("offeringTTL", fl.OfferingTTL, &l.OfferingTTL)
	dur("lockIn", fl.LockIn, &l.LockIn)
	dur("warnBefore", fl.WarnBefore, &l.WarnBefore)
	dur("terminateBefore", fl.TerminateBefore, &l.TerminateBefore)
	dur("extendFrom", fl.ExtendFrom, &l.ExtendFrom)
	dur("extendUntil", fl.ExtendUntil, &l.ExtendUntil)
	num(fl.RefundBeforeStartPercent, &l.RefundBeforeStart)
	num(fl.RefundAfterStartPercent, &l.RefundAfterStart)
	num(fl.MaxResults, &l.MaxResults)
	num(fl.ApprovalAboveInstances, &l.ApprovalAboveInstances)
	dur("approvalDeadline", fl.ApprovalDeadline, &l.ApprovalDeadline)
	if fl.Transfers != "" {
		l.Transfers = fl.Transfers
	}
	num(fl.ResaleFeePercent, &l.ResaleFeePercent)
	dur("backfillNotice", fl.BackfillNotice, &l.BackfillNotice)
	num(fl.LendCreditPercent, &l.LendCreditPercent)
	if fl.BudgetCountsCredits != nil {
		l.BudgetCountsCredits = *fl.BudgetCountsCredits
	}

	// set tells which keys the file gives, to attribute pairwise problems.
	set := map[string]bool{
		"minDuration": fl.MinDuration != "", "maxDuration": fl.MaxDuration != "",
		"minLeadTime": fl.MinLeadTime != "", "maxLeadTime": fl.MaxLeadTime != "",
		"horizon": fl.Horizon != "", "warnBefore": fl.WarnBefore != "",
		"terminateBefore": fl.TerminateBefore != "", "extendFrom": fl.ExtendFrom != "",
		"extendUntil": fl.ExtendUntil != "", "backfillNotice": fl.BackfillNotice != "",
	}
	at := func(keys ...string) string {
		for _, k := range keys {
			if set[k] {
				return "$.limits." + k
			}
		}
		return "$.limits"
	}
	f := humantime.FormatDuration
	check := func(ok bool, path, format string, args ...any) {
		if !ok {
			c.addf(path, where, format, args...)
		}
	}
	check(l.MaxInstancesPerBlock >= 1 && l.MaxInstancesPerBlock <= maxInstancesCap, "$.limits.maxInstancesPerBlock",
		"maxInstancesPerBlock is %d, must be 1 to %d", l.MaxInstancesPerBlock, maxInstancesCap)
	check(l.MinDuration >= time.Hour && l.MinDuration%time.Hour == 0, at("minDuration"),
		"minDuration is %s, must be a whole number of hours, at least 1h", f(l.MinDuration))
	check(l.MaxDuration%time.Hour == 0, at("maxDuration"),
		"maxDuration is %s, must be a whole number of hours", f(l.MaxDuration))
	check(l.MaxDuration >= l.MinDuration, at("maxDuration", "minDuration"),
		"maxDuration %s is shorter than minDuration %s", f(l.MaxDuration), f(l.MinDuration))
	check(l.MaxLeadTime >= l.MinLeadTime, at("maxLeadTime", "minLeadTime"),
		"maxLeadTime %s is shorter than minLeadTime %s", f(l.MaxLeadTime), f(l.MinLeadTime))
	check(l.Horizon%time.Hour == 0, at("horizon"),
		"horizon is %s, must be a whole number of hours", f(l.Horizon))
	check(l.Horizon >= l.MaxDuration, at("horizon", "maxDuration"),
		"horizon %s is shorter than maxDuration %s; the longest block must fit in it", f(l.Horizon), f(l.MaxDuration))
	check(l.Horizon >= l.MaxLeadTime+l.MinDuration, at("horizon", "maxLeadTime", "minDuration"),
		"horizon %s is shorter than maxLeadTime %s + minDuration %s; the latest block must fit in it", f(l.Horizon), f(l.MaxLeadTime), f(l.MinDuration))
	check(l.OfferingTTL > 0 && l.OfferingTTL <= maxOfferingTTL, "$.limits.offeringTTL",
		"offeringTTL is %s, must be more than 0 and at most %s", f(l.OfferingTTL), f(maxOfferingTTL))
	check(l.LockIn <= l.MaxLeadTime, at("lockIn", "maxLeadTime"),
		"lockIn %s is longer than maxLeadTime %s", f(l.LockIn), f(l.MaxLeadTime))
	check(l.TerminateBefore < l.MinDuration, at("terminateBefore", "minDuration"),
		"terminateBefore %s leaves no time to run in a block of minDuration %s", f(l.TerminateBefore), f(l.MinDuration))
	check(l.WarnBefore >= l.TerminateBefore, at("warnBefore", "terminateBefore"),
		"warnBefore %s comes after terminateBefore %s; the warning must come first", f(l.WarnBefore), f(l.TerminateBefore))
	check(l.ExtendFrom > l.ExtendUntil, at("extendFrom", "extendUntil"),
		"extendFrom %s must be longer than extendUntil %s", f(l.ExtendFrom), f(l.ExtendUntil))
	check(l.RefundBeforeStart >= 0 && l.RefundBeforeStart <= 100, "$.limits.refundBeforeStartPercent",
		"refundBeforeStartPercent is %d, must be 0 to 100", l.RefundBeforeStart)
	check(l.RefundAfterStart >= 0 && l.RefundAfterStart <= 100, "$.limits.refundAfterStartPercent",
		"refundAfterStartPercent is %d, must be 0 to 100", l.RefundAfterStart)
	check(l.ApprovalAboveInstances >= 0, "$.limits.approvalAboveInstances",
		"approvalAboveInstances is %d, must be 0 (no approval) or more", l.ApprovalAboveInstances)
	check(l.ApprovalAboveInstances == 0 || l.ApprovalDeadline < l.MinLeadTime, "$.limits.approvalDeadline",
		"approvalDeadline %s must be shorter than minLeadTime %s, or a block could fail as soon as bought", f(l.ApprovalDeadline), f(l.MinLeadTime))
	check(l.Transfers == core.TransfersNone || l.Transfers == core.TransfersAdmin || l.Transfers == core.TransfersAny,
		"$.limits.transfers", "transfers is %q, must be none, admin or any", l.Transfers)
	check(l.ResaleFeePercent >= 0 && l.ResaleFeePercent <= 100, "$.limits.resaleFeePercent",
		"resaleFeePercent is %d, must be 0 to 100", l.ResaleFeePercent)
	check(l.LendCreditPercent >= 0 && l.LendCreditPercent <= 100, "$.limits.lendCreditPercent",
		"lendCreditPercent is %d, must be 0 to 100", l.LendCreditPercent)
	check(l.BackfillNotice >= 0, "$.limits.backfillNotice", "backfillNotice is %s, must not be negative", f(l.BackfillNotice))
	check(l.MaxResults >= 1 && l.MaxResults <= maxResultsCap, "$.limits.maxResults",
		"maxResults is %d, must be 1 to %d", l.MaxResults, maxResultsCap)
	return l
}

// pricing applies the file's factors over core.DefaultPricing.
func (c *checker) pricing(fp filePricing) core.Pricing {
	p := core.DefaultPricing()
	const where = "pricing"
	factor := func(key string, d decimal, dst *int64) {
		if !d.set {
			return
		}
		bp, err := parseDecimal(d.text, 4)
		switch {
		case err != nil:
			c.addf("$.pricing."+key, where, "%s %q %v", key, d.text, err)
		case bp < 0 || bp > maxFactorBP:
			c.addf("$.pricing."+key, where, "%s is %s, must be 0 to %d (a factor of the on-demand price)", key, d.text, maxFactorBP/10000)
		default:
			*dst = bp
		}
	}
	factor("floor", fp.Floor, &p.FloorBP)
	factor("cap", fp.Cap, &p.CapBP)
	factor("base", fp.Base, &p.BaseBP)
	factor("utilization", fp.Utilization, &p.UtilizationBP)
	factor("leadDiscount", fp.LeadDiscount, &p.LeadDiscountBP)
	factor("spotFactor", fp.SpotFactor, &p.SpotBP)
	if p.CapBP == 0 {
		c.addf("$.pricing.cap", where, "cap is 0; blocks would be free")
	}
	if p.FloorBP > p.CapBP {
		path := "$.pricing.floor"
		if fp.Cap.set && !fp.Floor.set {
			path = "$.pricing.cap"
		}
		c.addf(path, where, "floor %s is above cap %s", bpString(p.FloorBP), bpString(p.CapBP))
	}
	return p
}

// bpString writes basis points as a factor: 7500 → "0.75".
func bpString(bp int64) string {
	s := fmt.Sprintf("%d.%04d", bp/10000, bp%10000)
	for s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	if s[len(s)-1] == '.' {
		s += "0"
	}
	return s
}
