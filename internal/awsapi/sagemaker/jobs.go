package sagemaker

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// A training job is a capblock job on a training plan. What maps:
//
//	AlgorithmSpecification.ContainerEntrypoint + ContainerArguments  the job's command (argv)
//	Environment                       the job's environment
//	HyperParameters                   SM_HP_<NAME> variables, as SageMaker's training toolkit sets them
//	ResourceConfig.TrainingPlanArn    the plan the job runs on (required: capblock runs jobs on bought capacity)
//	ResourceConfig.InstanceCount      the job's instances (all of the plan's when absent)
//	ResourceConfig.InstanceType       checked against the plan's type
//	RetryStrategy.MaximumRetryAttempts  the job's restarts after a non-zero exit
//
// The job also gets TRAINING_JOB_NAME and TRAINING_JOB_ARN, as on
// SageMaker, and capblock's own variables (CAPBLOCK_CHECKPOINT_DIR: a
// directory kept across restarts and a plan's segments, where
// CheckpointConfig's LocalPath would be). TrainingImage, RoleArn,
// InputDataConfig, OutputDataConfig, CheckpointConfig and
// StoppingCondition are accepted and not used: capblock runs a command,
// not an image, reads and writes no S3, and a job runs until it exits, is
// stopped, or its plan's capacity ends.

type algorithmJSON struct {
	TrainingInputMode   string   `json:",omitempty"`
	TrainingImage       string   `json:",omitempty"`
	ContainerEntrypoint []string `json:",omitempty"`
	ContainerArguments  []string `json:",omitempty"`
}

type resourceConfigJSON struct {
	InstanceType    string `json:",omitempty"`
	InstanceCount   int
	VolumeSizeInGB  int
	TrainingPlanArn string `json:",omitempty"`
}

type retryStrategyJSON struct {
	MaximumRetryAttempts int
}

type createJobInput struct {
	TrainingJobName        string
	AlgorithmSpecification *algorithmJSON
	Environment            map[string]string
	HyperParameters        map[string]string
	ResourceConfig         *struct {
		InstanceType    string
		InstanceCount   *int
		TrainingPlanArn string
	}
	RetryStrategy *retryStrategyJSON
}

type createJobOutput struct {
	TrainingJobArn string
}

// createJob is CreateTrainingJob.
func (h *Handler) createJob(ctx context.Context, c call) (any, error) {
	var in createJobInput
	if err := decode(c.body, &in); err != nil {
		return nil, err
	}
	// 1. The name, which must be free in the team.
	if err := checkName("TrainingJobName", in.TrainingJobName, 63); err != nil {
		return nil, err
	}
	// 2. The command.
	a := in.AlgorithmSpecification
	if a == nil || len(a.ContainerEntrypoint) == 0 {
		return nil, validationf("AlgorithmSpecification.ContainerEntrypoint is required: capblock runs a command on the plan's GPUs, " +
			"not an image (ContainerEntrypoint and ContainerArguments are its argv)")
	}
	command := append(slices.Clone(a.ContainerEntrypoint), a.ContainerArguments...)
	// 3. The plan, its type and the instances.
	rc := in.ResourceConfig
	if rc == nil || rc.TrainingPlanArn == "" {
		return nil, validationf("ResourceConfig.TrainingPlanArn is required: capblock runs training jobs on a training plan's capacity")
	}
	plan, err := h.findPlan(ctx, c.scope, rc.TrainingPlanArn)
	if err != nil {
		return nil, err
	}
	if rc.InstanceType != "" {
		t, err := h.capblockType(ctx, rc.InstanceType)
		if err != nil {
			return nil, err
		}
		if pt := planType(plan.Plan); t != pt {
			return nil, validationf("ResourceConfig.InstanceType %s: training plan %s is of %s", rc.InstanceType, planName(plan.Plan), h.awsType(pt))
		}
	}
	count := 0
	if rc.InstanceCount != nil {
		if count = *rc.InstanceCount; count < 1 {
			return nil, validationf("ResourceConfig.InstanceCount %d: want 1 or more", count)
		}
	}
	restarts := 0
	if in.RetryStrategy != nil {
		restarts = in.RetryStrategy.MaximumRetryAttempts
	}
	switch _, err := h.findJob(ctx, c.scope, in.TrainingJobName); {
	case err == nil:
		return nil, inUsef("a training job named %s already exists", in.TrainingJobName)
	case !isNotFound(err):
		return nil, err
	}
	// 4. Create.
	arn := h.arn("training-job", in.TrainingJobName)
	j, err := h.svc.CreateJob(ctx, c.scope, contract.JobRequest{Name: in.TrainingJobName, PlanID: plan.Plan.ID, Command: command,
		Env: jobEnv(in.Environment, in.HyperParameters, in.TrainingJobName, arn), InstanceCount: count, MaxRestarts: restarts})
	if err != nil {
		return nil, err
	}
	return createJobOutput{TrainingJobArn: h.arn("training-job", jobName(j))}, nil
}

func isNotFound(err error) bool {
	var ae *awsError
	return errors.As(err, &ae) && ae.Type == "ResourceNotFound"
}

// jobEnv is a training job's environment: env, each hyperparameter as
// SM_HP_<NAME> (upper case), and the job's name and ARN; what env sets
// is kept.
func jobEnv(env, hyper map[string]string, name, arn string) map[string]string {
	out := map[string]string{"TRAINING_JOB_NAME": name, "TRAINING_JOB_ARN": arn}
	for k, v := range hyper {
		out["SM_HP_"+strings.ToUpper(k)] = v
	}
	for k, v := range env {
		out[k] = v
	}
	return out
}

// planType is the instance type of a plan (of its segments).
func planType(p core.Plan) string {
	if len(p.Segments) == 0 {
		return ""
	}
	return p.Segments[0].InstanceType
}

// jobName is what SageMaker calls a job: its name, or its id when it has
// none (created through the REST API without one).
func jobName(j core.Job) string {
	if j.Name != "" {
		return j.Name
	}
	return j.ID
}

// findJob finds a job in scope by name, id or ARN; of jobs sharing a
// name, the first created.
func (h *Handler) findJob(ctx context.Context, scope, nameOrARN string) (core.Job, error) {
	name, ok := h.nameOf("training-job", nameOrARN)
	if !ok {
		return core.Job{}, notFoundf("training job %q not found", nameOrARN)
	}
	jobs, err := h.listJobsSorted(ctx, scope)
	if err != nil {
		return core.Job{}, err
	}
	for _, j := range jobs {
		if j.Name == name || j.ID == name {
			return j, nil
		}
	}
	return core.Job{}, notFoundf("training job %s not found", name)
}

func (h *Handler) listJobsSorted(ctx context.Context, scope string) ([]core.Job, error) {
	jobs, err := h.svc.ListJobs(ctx, scope)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(jobs, func(a, b core.Job) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return jobs, nil
}

// jobStatus is SageMaker's status and secondary status of a job's state.
var jobStatus = map[core.JobState][2]string{
	core.JobPending:     {"InProgress", "Pending"},
	core.JobRunning:     {"InProgress", "Training"},
	core.JobInterrupted: {"InProgress", "Interrupted"},
	core.JobSucceeded:   {"Completed", "Completed"},
	core.JobFailed:      {"Failed", "Failed"},
	core.JobStopped:     {"Stopped", "Stopped"},
}

type jobSummaryJSON struct {
	TrainingJobName   string
	TrainingJobArn    string
	TrainingJobStatus string
	SecondaryStatus   string
	CreationTime      *epoch
	LastModifiedTime  *epoch
	TrainingEndTime   *epoch `json:",omitempty"`
	TrainingPlanArn   string `json:",omitempty"`
}

type describeJobOutput struct {
	jobSummaryJSON
	FailureReason          string `json:",omitempty"`
	TrainingStartTime      *epoch `json:",omitempty"`
	TrainingTimeInSeconds  *int   `json:",omitempty"`
	AlgorithmSpecification algorithmJSON
	Environment            map[string]string
	ResourceConfig         resourceConfigJSON
	RetryStrategy          *retryStrategyJSON `json:",omitempty"`
}

// toJobSummary is j as SageMaker lists it; planArn is its plan's ARN.
func (h *Handler) toJobSummary(j core.Job, planArn string) jobSummaryJSON {
	st := jobStatus[j.State]
	last := j.CreatedAt
	for _, t := range []time.Time{j.StartedAt, j.EndedAt} {
		if t.After(last) {
			last = t
		}
	}
	return jobSummaryJSON{TrainingJobName: jobName(j), TrainingJobArn: h.arn("training-job", jobName(j)),
		TrainingJobStatus: st[0], SecondaryStatus: st[1], CreationTime: at(j.CreatedAt), LastModifiedTime: at(last),
		TrainingEndTime: at(j.EndedAt), TrainingPlanArn: planArn}
}

type jobNameInput struct {
	TrainingJobName string
}

// describeJob is DescribeTrainingJob.
func (h *Handler) describeJob(ctx context.Context, c call) (any, error) {
	var in jobNameInput
	if err := decode(c.body, &in); err != nil {
		return nil, err
	}
	if in.TrainingJobName == "" {
		return nil, validationf("TrainingJobName is required")
	}
	j, err := h.findJob(ctx, c.scope, in.TrainingJobName)
	if err != nil {
		return nil, err
	}
	rc := resourceConfigJSON{InstanceCount: j.InstanceCount}
	planArn := ""
	if j.PlanID != "" {
		if v, err := h.svc.GetPlan(ctx, c.scope, j.PlanID); err == nil {
			planArn = h.arn("training-plan", planName(v.Plan))
			rc.InstanceType = h.awsType(planType(v.Plan))
		}
	} else if b, err := h.svc.GetBlock(ctx, c.scope, j.BlockID); err == nil {
		rc.InstanceType = h.awsType(b.InstanceType)
	}
	rc.TrainingPlanArn = planArn
	out := describeJobOutput{jobSummaryJSON: h.toJobSummary(j, planArn),
		TrainingStartTime: at(j.StartedAt), ResourceConfig: rc, Environment: j.Env,
		AlgorithmSpecification: algorithmJSON{TrainingInputMode: "File", ContainerEntrypoint: j.Command}}
	if j.State == core.JobFailed {
		out.FailureReason = failureReason(j)
	}
	if !j.StartedAt.IsZero() {
		end := j.EndedAt
		if end.IsZero() {
			end = h.opts.Now()
		}
		secs := int(end.Sub(j.StartedAt) / time.Second)
		out.TrainingTimeInSeconds = &secs
	}
	if j.MaxRestarts > 0 {
		out.RetryStrategy = &retryStrategyJSON{MaximumRetryAttempts: j.MaxRestarts}
	}
	if out.Environment == nil {
		out.Environment = map[string]string{}
	}
	return out, nil
}

// failureReason words why a job failed as SageMaker does: the kind of
// error, then what happened.
func failureReason(j core.Job) string {
	switch code, ok := strings.CutPrefix(j.Reason, core.ReasonExitCode+" "); {
	case ok:
		return "AlgorithmError: the command exited with code " + code
	case j.Reason == core.ReasonCapacityEnded:
		return "CapacityError: the training plan's capacity ended before the job finished"
	case j.Reason == core.ReasonInsufficientCapacity:
		return "CapacityError: the job waited for its training plan's capacity longer than capblock allows (48 hours)"
	}
	return j.Reason
}

type listJobsInput struct {
	NameContains           string
	StatusEquals           string
	TrainingPlanArnEquals  string
	CreationTimeAfter      *epoch
	CreationTimeBefore     *epoch
	LastModifiedTimeAfter  *epoch
	LastModifiedTimeBefore *epoch
	SortBy                 string
	SortOrder              string
	MaxResults             *int
	NextToken              string
}

type listJobsOutput struct {
	TrainingJobSummaries []jobSummaryJSON
	NextToken            *string `json:",omitempty"`
}

// listJobs is ListTrainingJobs, with its filters, sorting and paging.
func (h *Handler) listJobs(ctx context.Context, c call) (any, error) {
	var in listJobsInput
	if err := decode(c.body, &in); err != nil {
		return nil, err
	}
	jobs, err := h.listJobsSorted(ctx, c.scope)
	if err != nil {
		return nil, err
	}
	plans, err := h.svc.ListPlans(ctx, c.scope)
	if err != nil {
		return nil, err
	}
	planArns := map[string]string{}
	for _, v := range plans {
		planArns[v.Plan.ID] = h.arn("training-plan", planName(v.Plan))
	}
	after := func(t time.Time, bound *epoch) bool { return bound == nil || t.After(bound.Time) }
	before := func(t time.Time, bound *epoch) bool { return bound == nil || t.Before(bound.Time) }
	var rows []jobSummaryJSON
	for _, j := range jobs {
		s := h.toJobSummary(j, planArns[j.PlanID])
		switch {
		case in.NameContains != "" && !strings.Contains(s.TrainingJobName, in.NameContains),
			in.StatusEquals != "" && s.TrainingJobStatus != in.StatusEquals,
			in.TrainingPlanArnEquals != "" && s.TrainingPlanArn != in.TrainingPlanArnEquals,
			!after(j.CreatedAt, in.CreationTimeAfter), !before(j.CreatedAt, in.CreationTimeBefore),
			!after(s.LastModifiedTime.Time, in.LastModifiedTimeAfter), !before(s.LastModifiedTime.Time, in.LastModifiedTimeBefore):
			continue
		}
		rows = append(rows, s)
	}
	if err := sortRows(rows, in.SortBy, in.SortOrder, map[string]func(a, b jobSummaryJSON) int{
		"Name":         func(a, b jobSummaryJSON) int { return strings.Compare(a.TrainingJobName, b.TrainingJobName) },
		"CreationTime": func(a, b jobSummaryJSON) int { return compareEpoch(a.CreationTime, b.CreationTime) },
		"Status":       func(a, b jobSummaryJSON) int { return strings.Compare(a.TrainingJobStatus, b.TrainingJobStatus) },
	}); err != nil {
		return nil, err
	}
	rows, next, err := page(rows, in.NextToken, in.MaxResults)
	if err != nil {
		return nil, err
	}
	return listJobsOutput{TrainingJobSummaries: rows, NextToken: next}, nil
}

// stopJob is StopTrainingJob; its output is empty. A job already ended
// is a ValidationException, as on SageMaker.
func (h *Handler) stopJob(ctx context.Context, c call) (any, error) {
	var in jobNameInput
	if err := decode(c.body, &in); err != nil {
		return nil, err
	}
	if in.TrainingJobName == "" {
		return nil, validationf("TrainingJobName is required")
	}
	j, err := h.findJob(ctx, c.scope, in.TrainingJobName)
	if err != nil {
		return nil, err
	}
	if _, err := h.svc.StopJob(ctx, c.scope, j.ID); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}
