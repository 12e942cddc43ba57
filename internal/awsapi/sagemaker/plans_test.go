package sagemaker_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/google/go-cmp/cmp"

	"capblock/internal/core"
)

// TestTrainingPlans: a member searches offerings in AWS's names, buys
// one (a retry returns the same plan, the name with another offering is
// refused), describes and lists it, with filters, sorting and paging.
func TestTrainingPlans(t *testing.T) {
	e := newEnv(t)
	red := e.team(t, "red")
	c := e.client(t, "alice", red, core.RoleMember)
	ctx := t.Context()

	// 1. Search: two instances for 24 hours.
	offers := search(t, c, 2, 24)
	if len(offers) == 0 {
		t.Fatal("no offering for 2 ml.p5.48xlarge over 24 h in an empty fleet")
	}
	o := offers[0]
	if got := aws.ToInt64(o.DurationHours); got != 24 {
		t.Errorf("DurationHours %d, want 24", got)
	}
	if aws.ToString(o.CurrencyCode) != "USD" || aws.ToString(o.UpfrontFee) == "" {
		t.Errorf("fee %q %q", aws.ToString(o.UpfrontFee), aws.ToString(o.CurrencyCode))
	}
	if len(o.ReservedCapacityOfferings) == 0 {
		t.Fatal("no reserved capacity offering")
	}
	var hours int64
	for _, rc := range o.ReservedCapacityOfferings {
		if rc.InstanceType != types.ReservedCapacityInstanceTypeMlP548xlarge || aws.ToInt32(rc.InstanceCount) != 2 {
			t.Errorf("reserved capacity %s x%d, want ml.p5.48xlarge x2", rc.InstanceType, aws.ToInt32(rc.InstanceCount))
		}
		if rc.StartTime.Before(t0) || !rc.EndTime.After(*rc.StartTime) {
			t.Errorf("reserved capacity %v to %v", rc.StartTime, rc.EndTime)
		}
		hours += aws.ToInt64(rc.DurationHours)
	}
	if hours != 24 {
		t.Errorf("segments sum to %d hours, want 24", hours)
	}

	// 2. Buy; a retry of the same call returns the same plan.
	create := &sm.CreateTrainingPlanInput{TrainingPlanName: aws.String("llm-run"), TrainingPlanOfferingId: o.TrainingPlanOfferingId}
	first, err := c.CreateTrainingPlan(ctx, create)
	if err != nil {
		t.Fatalf("CreateTrainingPlan: %v", err)
	}
	const arn = "arn:aws:sagemaker:eu-west-1:123456789012:training-plan/llm-run"
	if got := aws.ToString(first.TrainingPlanArn); got != arn {
		t.Errorf("ARN %q, want %q", got, arn)
	}
	again, err := c.CreateTrainingPlan(ctx, create)
	if err != nil || aws.ToString(again.TrainingPlanArn) != arn {
		t.Fatalf("retried CreateTrainingPlan: %v, %v", again, err)
	}
	other := search(t, c, 1, 4)
	_, err = c.CreateTrainingPlan(ctx, &sm.CreateTrainingPlanInput{TrainingPlanName: aws.String("llm-run"), TrainingPlanOfferingId: other[0].TrainingPlanOfferingId})
	if got := errorCode(t, err); got != "ResourceInUse" {
		t.Errorf("the name again with another offering: %s, want ResourceInUse", got)
	}
	plans, err := e.svc.ListPlans(ctx, red)
	if err != nil || len(plans) != 1 {
		t.Fatalf("the team has %d plans (%v), want 1: a retry must not buy twice", len(plans), err)
	}

	// 3. Describe, by name and by ARN.
	for _, name := range []string{"llm-run", arn} {
		d, err := c.DescribeTrainingPlan(ctx, &sm.DescribeTrainingPlanInput{TrainingPlanName: aws.String(name)})
		if err != nil {
			t.Fatalf("DescribeTrainingPlan %s: %v", name, err)
		}
		got := map[string]any{"name": aws.ToString(d.TrainingPlanName), "status": string(d.Status), "hours": aws.ToInt64(d.DurationHours),
			"total": aws.ToInt32(d.TotalInstanceCount), "available": aws.ToInt32(d.AvailableInstanceCount), "fee": aws.ToString(d.UpfrontFee),
			"start": *d.StartTime, "segments": len(d.ReservedCapacitySummaries), "target": d.TargetResources}
		want := map[string]any{"name": "llm-run", "status": "Scheduled", "hours": int64(24), "total": int32(2), "available": int32(0),
			"fee": aws.ToString(o.UpfrontFee), "start": *o.ReservedCapacityOfferings[0].StartTime, "segments": len(o.ReservedCapacityOfferings),
			"target": []types.SageMakerResourceName{types.SageMakerResourceNameTrainingJob}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("DescribeTrainingPlan %s (-want +got):\n%s", name, diff)
		}
	}

	// 4. List, filtered, sorted and paged, with a second plan bought a
	//    minute later.
	e.sim.Advance(time.Minute)
	buy(t, c, "second", 1, 2)
	list := func(in *sm.ListTrainingPlansInput) ([]string, *string) {
		t.Helper()
		out, err := c.ListTrainingPlans(ctx, in)
		if err != nil {
			t.Fatalf("ListTrainingPlans: %v", err)
		}
		var names []string
		for _, s := range out.TrainingPlanSummaries {
			names = append(names, aws.ToString(s.TrainingPlanName))
		}
		return names, out.NextToken
	}
	if got, _ := list(&sm.ListTrainingPlansInput{}); !cmp.Equal(got, []string{"llm-run", "second"}) {
		t.Errorf("all plans %v", got)
	}
	if got, _ := list(&sm.ListTrainingPlansInput{SortBy: types.TrainingPlanSortByName, SortOrder: types.TrainingPlanSortOrderDescending}); !cmp.Equal(got, []string{"second", "llm-run"}) {
		t.Errorf("plans by name, descending: %v", got)
	}
	active := []types.TrainingPlanFilter{{Name: types.TrainingPlanFilterNameStatus, Value: aws.String("Active")}}
	if got, _ := list(&sm.ListTrainingPlansInput{Filters: active}); len(got) != 0 {
		t.Errorf("active plans before any start: %v", got)
	}
	page1, next := list(&sm.ListTrainingPlansInput{MaxResults: aws.Int32(1)})
	if len(page1) != 1 || next == nil {
		t.Fatalf("first page %v, next %v", page1, next)
	}
	page2, next := list(&sm.ListTrainingPlansInput{MaxResults: aws.Int32(1), NextToken: next})
	if !cmp.Equal(append(page1, page2...), []string{"llm-run", "second"}) || next != nil {
		t.Errorf("pages %v %v, next %v", page1, page2, next)
	}

	// 5. The plan becomes active at its start.
	e.sim.Set(o.ReservedCapacityOfferings[0].StartTime.Add(time.Minute))
	eventually(t, "the plan is active", func() bool {
		d, err := c.DescribeTrainingPlan(ctx, &sm.DescribeTrainingPlanInput{TrainingPlanName: aws.String("llm-run")})
		return err == nil && d.Status == types.TrainingPlanStatusActive && aws.ToInt32(d.AvailableInstanceCount) == 2
	})
}
