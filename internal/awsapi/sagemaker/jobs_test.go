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

// TestTrainingJobs: a training job on a plan is a capblock job with the
// container's entrypoint and arguments as its command; it waits for the
// plan (Pending), runs when the plan starts and completes when its
// process exits 0; a second job is stopped, and stopping it again is a
// ValidationException.
func TestTrainingJobs(t *testing.T) {
	e := newEnv(t)
	red := e.team(t, "red")
	c := e.client(t, "alice", red, core.RoleMember)
	ctx := t.Context()
	planArn := buy(t, c, "train", 1, 4)

	// 1. Create; the job waits for its plan.
	out, err := c.CreateTrainingJob(ctx, jobInput("fit", planArn, "sh", "-c", `test "$SM_HP_EPOCHS" = 3 && test "$MODE" = test`))
	if err != nil {
		t.Fatalf("CreateTrainingJob: %v", err)
	}
	const arn = "arn:aws:sagemaker:eu-west-1:123456789012:training-job/fit"
	if got := aws.ToString(out.TrainingJobArn); got != arn {
		t.Errorf("ARN %q, want %q", got, arn)
	}
	_, err = c.CreateTrainingJob(ctx, jobInput("fit", planArn, "true"))
	if got := errorCode(t, err); got != "ResourceInUse" {
		t.Errorf("a second job named fit: %s, want ResourceInUse", got)
	}
	d, err := c.DescribeTrainingJob(ctx, &sm.DescribeTrainingJobInput{TrainingJobName: aws.String("fit")})
	if err != nil {
		t.Fatalf("DescribeTrainingJob: %v", err)
	}
	got := map[string]any{"name": aws.ToString(d.TrainingJobName), "arn": aws.ToString(d.TrainingJobArn),
		"status": string(d.TrainingJobStatus), "secondary": string(d.SecondaryStatus),
		"entrypoint": d.AlgorithmSpecification.ContainerEntrypoint, "plan": aws.ToString(d.ResourceConfig.TrainingPlanArn),
		"type": string(d.ResourceConfig.InstanceType), "count": aws.ToInt32(d.ResourceConfig.InstanceCount),
		"retries": aws.ToInt32(d.RetryStrategy.MaximumRetryAttempts), "env": d.Environment}
	want := map[string]any{"name": "fit", "arn": arn, "status": "InProgress", "secondary": "Pending",
		"entrypoint": []string{"sh", "-c", `test "$SM_HP_EPOCHS" = 3 && test "$MODE" = test`}, "plan": planArn,
		"type": "ml.p5.48xlarge", "count": int32(1), "retries": int32(2),
		"env": map[string]string{"MODE": "test", "SM_HP_EPOCHS": "3", "TRAINING_JOB_NAME": "fit", "TRAINING_JOB_ARN": arn}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DescribeTrainingJob (-want +got):\n%s", diff)
	}

	// 2. A second job, a minute later, stopped before it runs; stopping
	//    again is refused.
	e.sim.Advance(time.Minute)
	if _, err := c.CreateTrainingJob(ctx, jobInput("spare", planArn, "sleep", "600")); err != nil {
		t.Fatalf("CreateTrainingJob spare: %v", err)
	}
	if _, err := c.StopTrainingJob(ctx, &sm.StopTrainingJobInput{TrainingJobName: aws.String("spare")}); err != nil {
		t.Fatalf("StopTrainingJob: %v", err)
	}
	_, err = c.StopTrainingJob(ctx, &sm.StopTrainingJobInput{TrainingJobName: aws.String("spare")})
	if got := errorCode(t, err); got != "ValidationException" {
		t.Errorf("stopping a stopped job: %s, want ValidationException", got)
	}

	// 3. List, filtered and sorted.
	list := func(in *sm.ListTrainingJobsInput) []string {
		t.Helper()
		out, err := c.ListTrainingJobs(ctx, in)
		if err != nil {
			t.Fatalf("ListTrainingJobs: %v", err)
		}
		var rows []string
		for _, s := range out.TrainingJobSummaries {
			rows = append(rows, aws.ToString(s.TrainingJobName)+" "+string(s.TrainingJobStatus)+" "+aws.ToString(s.TrainingPlanArn))
		}
		return rows
	}
	all := []string{"fit InProgress " + planArn, "spare Stopped " + planArn}
	for name, tc := range map[string]struct {
		in   *sm.ListTrainingJobsInput
		want []string
	}{
		"all":       {&sm.ListTrainingJobsInput{}, all},
		"stopped":   {&sm.ListTrainingJobsInput{StatusEquals: types.TrainingJobStatusStopped}, all[1:]},
		"name":      {&sm.ListTrainingJobsInput{NameContains: aws.String("fi")}, all[:1]},
		"plan":      {&sm.ListTrainingJobsInput{TrainingPlanArnEquals: aws.String(planArn)}, all},
		"otherPlan": {&sm.ListTrainingJobsInput{TrainingPlanArnEquals: aws.String(planArn + "x")}, nil},
		"byName":    {&sm.ListTrainingJobsInput{SortBy: types.SortByName, SortOrder: types.SortOrderDescending}, []string{all[1], all[0]}},
	} {
		if diff := cmp.Diff(tc.want, list(tc.in)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}

	// 4. The plan starts: the job runs its command, which checks its
	//    environment, and completes; then a job whose command fails runs
	//    on the instance it frees, and fails.
	if _, err := c.CreateTrainingJob(ctx, jobInput("oops", planArn, "sh", "-c", "exit 3")); err != nil {
		t.Fatalf("CreateTrainingJob oops: %v", err)
	}
	plan, err := c.DescribeTrainingPlan(ctx, &sm.DescribeTrainingPlanInput{TrainingPlanName: aws.String(planArn)})
	if err != nil {
		t.Fatal(err)
	}
	e.sim.Set(*plan.StartTime)
	var last *sm.DescribeTrainingJobOutput
	eventually(t, "the job completes", func() bool {
		last, err = c.DescribeTrainingJob(ctx, &sm.DescribeTrainingJobInput{TrainingJobName: aws.String(arn)})
		return err == nil && last.TrainingJobStatus != types.TrainingJobStatusInProgress
	})
	if last.TrainingJobStatus != types.TrainingJobStatusCompleted || last.SecondaryStatus != types.SecondaryStatusCompleted {
		t.Fatalf("job ended %s/%s (%s), want Completed", last.TrainingJobStatus, last.SecondaryStatus, aws.ToString(last.FailureReason))
	}
	if last.TrainingStartTime == nil || last.TrainingEndTime == nil || last.TrainingTimeInSeconds == nil {
		t.Errorf("times: start %v end %v seconds %v", last.TrainingStartTime, last.TrainingEndTime, last.TrainingTimeInSeconds)
	}
	eventually(t, "the failing job ends", func() bool {
		last, err = c.DescribeTrainingJob(ctx, &sm.DescribeTrainingJobInput{TrainingJobName: aws.String("oops")})
		return err == nil && last.TrainingJobStatus != types.TrainingJobStatusInProgress
	})
	got = map[string]any{"status": string(last.TrainingJobStatus), "secondary": string(last.SecondaryStatus), "reason": aws.ToString(last.FailureReason)}
	want = map[string]any{"status": "Failed", "secondary": "Failed", "reason": "AlgorithmError: the command exited with code 3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("failed job (-want +got):\n%s", diff)
	}
}
