package sagemaker

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// Targets as SageMaker names them.
const (
	targetTrainingJob = "training-job"
	targetCluster     = "hyperpod-cluster"
)

type searchOfferingsInput struct {
	InstanceType    string
	InstanceCount   *int
	StartTimeAfter  *epoch
	EndTimeBefore   *epoch
	DurationHours   *int64
	TargetResources []string
	TrainingPlanArn *string
}

type reservedCapacityOfferingJSON struct {
	InstanceType         string
	InstanceCount        int
	AvailabilityZone     string
	DurationHours        int
	StartTime            *epoch
	EndTime              *epoch
	ReservedCapacityType string
}

type offeringJSON struct {
	TrainingPlanOfferingId    string
	TargetResources           []string
	RequestedStartTimeAfter   *epoch
	RequestedEndTimeBefore    *epoch
	DurationHours             int
	UpfrontFee                string
	CurrencyCode              string
	ReservedCapacityOfferings []reservedCapacityOfferingJSON
}

type searchOfferingsOutput struct {
	TrainingPlanOfferings []offeringJSON
}

// searchOfferings is SearchTrainingPlanOfferings: capblock's plan search,
// one offering per plan with a reserved capacity offering per segment.
// No capacity is an empty list, as SageMaker answers.
func (h *Handler) searchOfferings(ctx context.Context, c call) (any, error) {
	var in searchOfferingsInput
	if err := decode(c.body, &in); err != nil {
		return nil, err
	}
	// 1. Check and complete the request.
	if in.TrainingPlanArn != nil {
		return nil, validationf("TrainingPlanArn: extending a training plan is not supported; capblock extends its blocks through its own API")
	}
	if in.InstanceType == "" {
		return nil, validationf("InstanceType is required")
	}
	t, err := h.capblockType(ctx, in.InstanceType)
	if err != nil {
		return nil, err
	}
	if in.InstanceCount == nil || *in.InstanceCount < 1 {
		return nil, validationf("InstanceCount is required: 1 or more instances")
	}
	if in.DurationHours == nil || *in.DurationHours < 1 || *in.DurationHours > 1<<20 {
		return nil, validationf("DurationHours is required: 1 or more hours, summed over the plan's segments")
	}
	target, err := targetOf(in.TargetResources)
	if err != nil {
		return nil, err
	}
	duration := time.Duration(*in.DurationHours) * time.Hour
	start := h.opts.Now()
	if in.StartTimeAfter != nil {
		start = in.StartTimeAfter.Time
	}
	fleet, err := h.svc.Fleet(ctx)
	if err != nil {
		return nil, err
	}
	end := start.Add(fleet.Limits.MaxLeadTime + duration)
	if in.EndTimeBefore != nil {
		end = in.EndTimeBefore.Time
	}
	if !end.After(start) {
		return nil, validationf("EndTimeBefore must be after StartTimeAfter")
	}
	// 2. Search.
	offerings, err := h.svc.PlanOfferings(ctx, core.PlanSearchRequest{Team: contract.TeamOf(c.p, ""), Type: t, Count: *in.InstanceCount, Duration: duration,
		StartAfter: start, EndBefore: end, Target: target})
	if err != nil {
		return nil, err
	}
	out := searchOfferingsOutput{TrainingPlanOfferings: []offeringJSON{}}
	for _, o := range offerings {
		j := offeringJSON{TrainingPlanOfferingId: o.ID, TargetResources: []string{awsTarget(o.Target)},
			RequestedStartTimeAfter: at(start), RequestedEndTimeBefore: at(end), DurationHours: o.DurationHours(),
			UpfrontFee: o.Fee().String(), CurrencyCode: o.Fee().Currency}
		for _, s := range o.Segments {
			j.ReservedCapacityOfferings = append(j.ReservedCapacityOfferings, reservedCapacityOfferingJSON{
				InstanceType: h.awsType(o.InstanceType), InstanceCount: o.Count, AvailabilityZone: o.Zone,
				DurationHours: s.DurationHours(), StartTime: at(s.Start), EndTime: at(s.End), ReservedCapacityType: "Instance"})
		}
		out.TrainingPlanOfferings = append(out.TrainingPlanOfferings, j)
	}
	return out, nil
}

// targetOf is capblock's target of SageMaker's TargetResources (one).
func targetOf(resources []string) (string, error) {
	switch {
	case len(resources) == 0:
		return core.TargetTrainingJob, nil
	case len(resources) > 1:
		return "", validationf("TargetResources: give one of %s and %s; a capblock plan serves one target", targetTrainingJob, targetCluster)
	case resources[0] == targetTrainingJob:
		return core.TargetTrainingJob, nil
	case resources[0] == targetCluster:
		return core.TargetCluster, nil
	}
	return "", validationf("TargetResources %q: want %s or %s", resources[0], targetTrainingJob, targetCluster)
}

func awsTarget(t string) string {
	if t == core.TargetCluster {
		return targetCluster
	}
	return targetTrainingJob
}

type createPlanInput struct {
	TrainingPlanName       string
	TrainingPlanOfferingId string
}

type createPlanOutput struct {
	TrainingPlanArn string
}

// createPlan is CreateTrainingPlan: buys the offering for the caller's
// team under a client token derived from the plan's name. The same name
// and offering again (a retry) returns the plan bought first; the same
// name with another offering is refused as ResourceInUse, so a name names
// one plan of the team.
func (h *Handler) createPlan(ctx context.Context, c call) (any, error) {
	var in createPlanInput
	if err := decode(c.body, &in); err != nil {
		return nil, err
	}
	if err := checkName("TrainingPlanName", in.TrainingPlanName, 64); err != nil {
		return nil, err
	}
	if in.TrainingPlanOfferingId == "" {
		return nil, validationf("TrainingPlanOfferingId is required: an offering from SearchTrainingPlanOfferings")
	}
	team := contract.TeamOf(c.p, "")
	v, _, err := h.svc.PurchasePlan(ctx, contract.PlanPurchaseRequest{Team: team, OfferingID: in.TrainingPlanOfferingId,
		ClientToken: planToken(in.TrainingPlanName), Name: in.TrainingPlanName})
	if errors.Is(err, core.ErrIdempotencyMismatch) {
		return nil, inUsef("a training plan named %s already exists, bought with another offering; choose another name", in.TrainingPlanName)
	}
	if err != nil {
		return nil, err
	}
	return createPlanOutput{TrainingPlanArn: h.arn("training-plan", planName(v.Plan))}, nil
}

// planToken is capblock's client token of a plan bought through
// SageMaker: one per name within a team.
func planToken(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "sagemaker-plan-" + hex.EncodeToString(sum[:])[:40]
}

// planName is what SageMaker calls a plan: its name, or its id when it
// has none (bought through the REST API without one).
func planName(p core.Plan) string {
	if p.Name != "" {
		return p.Name
	}
	return p.ID
}

// findPlan finds a plan in scope by name, id or ARN; of plans sharing a
// name, the first bought.
func (h *Handler) findPlan(ctx context.Context, scope, nameOrARN string) (contract.PlanView, error) {
	name, ok := h.nameOf("training-plan", nameOrARN)
	if !ok {
		return contract.PlanView{}, notFoundf("training plan %q not found", nameOrARN)
	}
	plans, err := h.listPlansSorted(ctx, scope)
	if err != nil {
		return contract.PlanView{}, err
	}
	for _, v := range plans {
		if v.Plan.Name == name || v.Plan.ID == name {
			return v, nil
		}
	}
	return contract.PlanView{}, notFoundf("training plan %s not found", name)
}

// listPlansSorted lists the plans in scope, first bought first.
func (h *Handler) listPlansSorted(ctx context.Context, scope string) ([]contract.PlanView, error) {
	plans, err := h.svc.ListPlans(ctx, scope)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(plans, func(a, b contract.PlanView) int {
		return cmp.Or(a.Plan.CreatedAt.Compare(b.Plan.CreatedAt), strings.Compare(a.Plan.ID, b.Plan.ID))
	})
	return plans, nil
}

type describePlanInput struct {
	TrainingPlanName string
}

type reservedCapacitySummaryJSON struct {
	ReservedCapacityArn  string
	InstanceType         string
	TotalInstanceCount   int
	Status               string
	AvailabilityZone     string
	DurationHours        int
	StartTime            *epoch
	EndTime              *epoch
	ReservedCapacityType string
}

// planJSON is DescribeTrainingPlan's output and, less its unhealthy
// count, a ListTrainingPlans summary.
type planJSON struct {
	TrainingPlanArn           string
	TrainingPlanName          string
	Status                    string
	StatusMessage             string `json:",omitempty"`
	DurationHours             int
	StartTime                 *epoch
	EndTime                   *epoch
	UpfrontFee                string
	CurrencyCode              string
	TotalInstanceCount        int
	AvailableInstanceCount    int
	InUseInstanceCount        int
	UnhealthyInstanceCount    *int `json:",omitempty"`
	TargetResources           []string
	ReservedCapacitySummaries []reservedCapacitySummaryJSON
}

// planStatus is SageMaker's status of a plan's state (and of a
// segment's, as a reserved capacity's).
var planStatus = map[core.PlanState]string{
	core.PlanPending:   "Pending",
	core.PlanScheduled: "Scheduled",
	core.PlanActive:    "Active",
	core.PlanExpired:   "Expired",
	core.PlanFailed:    "Failed",
}

func (h *Handler) toPlan(v contract.PlanView) planJSON {
	p := v.Plan
	j := planJSON{TrainingPlanArn: h.arn("training-plan", planName(p)), TrainingPlanName: planName(p),
		Status: planStatus[v.State], UpfrontFee: p.Fee.String(), CurrencyCode: p.Fee.Currency,
		AvailableInstanceCount: v.Capacity.Available, InUseInstanceCount: v.Capacity.InUse,
		TargetResources: []string{awsTarget(p.Target)}, ReservedCapacitySummaries: []reservedCapacitySummaryJSON{}}
	segments := slices.Clone(p.Segments)
	core.SortSegments(segments)
	for _, b := range segments {
		hours := int(b.End.Sub(b.Start) / time.Hour)
		j.DurationHours += hours
		j.TotalInstanceCount = b.Count
		j.ReservedCapacitySummaries = append(j.ReservedCapacitySummaries, reservedCapacitySummaryJSON{
			ReservedCapacityArn: h.arn("reserved-capacity", b.ID), InstanceType: h.awsType(b.InstanceType),
			TotalInstanceCount: b.Count, Status: planStatus[core.PlanStateOf([]core.Block{b})], AvailabilityZone: b.Zone,
			DurationHours: hours, StartTime: at(b.Start), EndTime: at(b.End), ReservedCapacityType: "Instance"})
	}
	if len(segments) > 0 {
		j.StartTime, j.EndTime = at(segments[0].Start), at(segments[len(segments)-1].End)
	}
	if v.State == core.PlanFailed {
		j.StatusMessage = "a segment of the plan failed or was cancelled"
	}
	return j
}

func (h *Handler) describePlan(ctx context.Context, c call) (any, error) {
	var in describePlanInput
	if err := decode(c.body, &in); err != nil {
		return nil, err
	}
	if in.TrainingPlanName == "" {
		return nil, validationf("TrainingPlanName is required")
	}
	v, err := h.findPlan(ctx, c.scope, in.TrainingPlanName)
	if err != nil {
		return nil, err
	}
	j := h.toPlan(v)
	j.UnhealthyInstanceCount = &v.Capacity.Unhealthy
	return j, nil
}

type planFilterJSON struct {
	Name  string
	Value string
}

type listPlansInput struct {
	Filters         []planFilterJSON
	MaxResults      *int
	NextToken       string
	SortBy          string
	SortOrder       string
	StartTimeAfter  *epoch
	StartTimeBefore *epoch
}

type listPlansOutput struct {
	TrainingPlanSummaries []planJSON
	NextToken             *string `json:",omitempty"`
}

// listPlans is ListTrainingPlans, with its Status filter, start-time
// bounds, sorting and paging.
func (h *Handler) listPlans(ctx context.Context, c call) (any, error) {
	var in listPlansInput
	if err := decode(c.body, &in); err != nil {
		return nil, err
	}
	status := ""
	for _, f := range in.Filters {
		if f.Name != "Status" {
			return nil, validationf("Filters: unknown filter %q; capblock filters on Status", f.Name)
		}
		status = f.Value
	}
	plans, err := h.listPlansSorted(ctx, c.scope)
	if err != nil {
		return nil, err
	}
	var rows []planJSON
	for _, v := range plans {
		j := h.toPlan(v)
		switch {
		case status != "" && j.Status != status,
			in.StartTimeAfter != nil && (j.StartTime == nil || !j.StartTime.After(in.StartTimeAfter.Time)),
			in.StartTimeBefore != nil && (j.StartTime == nil || !j.StartTime.Before(in.StartTimeBefore.Time)):
			continue
		}
		rows = append(rows, j)
	}
	if err := sortRows(rows, in.SortBy, in.SortOrder, map[string]func(a, b planJSON) int{
		"TrainingPlanName": func(a, b planJSON) int { return strings.Compare(a.TrainingPlanName, b.TrainingPlanName) },
		"StartTime":        func(a, b planJSON) int { return compareEpoch(a.StartTime, b.StartTime) },
		"Status":           func(a, b planJSON) int { return strings.Compare(a.Status, b.Status) },
	}); err != nil {
		return nil, err
	}
	rows, next, err := page(rows, in.NextToken, in.MaxResults)
	if err != nil {
		return nil, err
	}
	return listPlansOutput{TrainingPlanSummaries: rows, NextToken: next}, nil
}

func compareEpoch(a, b *epoch) int {
	var x, y time.Time
	if a != nil {
		x = a.Time
	}
	if b != nil {
		y = b.Time
	}
	return x.Compare(y)
}
