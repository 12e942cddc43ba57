package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
)

// registerPolicy declares the operator's policy: the rules a buyer is held
// to, so that a client can say what a cancellation refunds or whether a
// purchase waits for approval before acting.
func (s *server) registerPolicy(api huma.API) {
	huma.Register(api, s.operation("getPolicy", http.MethodGet, "/v1/policy", "fleet",
		"The operator's policy: what can be bought, refunds, approval, extensions (the fleet file's limits)"), s.getPolicy)
}

// policyJSON is the fleet's limits on the wire. Durations are whole
// seconds, so that a client computes with them without parsing.
type policyJSON struct {
	MaxInstancesPerBlock     int   `json:"maxInstancesPerBlock"`
	MinDurationSeconds       int64 `json:"minDurationSeconds"`
	MaxDurationSeconds       int64 `json:"maxDurationSeconds"`
	MinLeadTimeSeconds       int64 `json:"minLeadTimeSeconds" doc:"Earliest start, counted from now."`
	MaxLeadTimeSeconds       int64 `json:"maxLeadTimeSeconds" doc:"Latest start, counted from now."`
	OfferingTTLSeconds       int64 `json:"offeringTtlSeconds" doc:"How long a quote can be bought."`
	LockInSeconds            int64 `json:"lockInSeconds" doc:"A scheduled block's placement may move until this long before its start."`
	WarnBeforeSeconds        int64 `json:"warnBeforeSeconds" doc:"Workloads are warned this long before a block's end."`
	TerminateBeforeSeconds   int64 `json:"terminateBeforeSeconds" doc:"Workloads are stopped from this long before a block's end."`
	ExtendFromSeconds        int64 `json:"extendFromSeconds" doc:"Extensions are offered from this long before a block's end…"`
	ExtendUntilSeconds       int64 `json:"extendUntilSeconds" doc:"…down to this long before it."`
	RefundBeforeStartPercent int   `json:"refundBeforeStartPercent" doc:"Percent of the fee refunded when a block is cancelled before its start."`
	RefundAfterStartPercent  int   `json:"refundAfterStartPercent" doc:"Percent of the fee refunded when a block is released after its start."`
	ApprovalAboveInstances   int   `json:"approvalAboveInstances" doc:"Blocks of more instances than this wait in payment-pending for an administrator's approval; 0: none do."`
	ApprovalDeadlineSeconds  int64 `json:"approvalDeadlineSeconds" doc:"A block still unapproved this long before its start becomes payment-failed."`
	MaxResults               int   `json:"maxResults" doc:"Offerings returned by one search, at most."`
}

func (s *server) getPolicy(ctx context.Context, _ *struct{}) (*out[policyJSON], error) {
	f, err := s.svc.Fleet(ctx)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	l := f.Limits
	secs := func(d time.Duration) int64 { return int64(d / time.Second) }
	return reply(policyJSON{
		MaxInstancesPerBlock:     l.MaxInstancesPerBlock,
		MinDurationSeconds:       secs(l.MinDuration),
		MaxDurationSeconds:       secs(l.MaxDuration),
		MinLeadTimeSeconds:       secs(l.MinLeadTime),
		MaxLeadTimeSeconds:       secs(l.MaxLeadTime),
		OfferingTTLSeconds:       secs(l.OfferingTTL),
		LockInSeconds:            secs(l.LockIn),
		WarnBeforeSeconds:        secs(l.WarnBefore),
		TerminateBeforeSeconds:   secs(l.TerminateBefore),
		ExtendFromSeconds:        secs(l.ExtendFrom),
		ExtendUntilSeconds:       secs(l.ExtendUntil),
		RefundBeforeStartPercent: l.RefundBeforeStart,
		RefundAfterStartPercent:  l.RefundAfterStart,
		ApprovalAboveInstances:   l.ApprovalAboveInstances,
		ApprovalDeadlineSeconds:  secs(l.ApprovalDeadline),
		MaxResults:               l.MaxResults,
	})
}
