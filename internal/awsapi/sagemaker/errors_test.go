package sagemaker_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/google/go-cmp/cmp"

	"capblock/internal/awsapi/sagemaker"
	"capblock/internal/contract"
	"capblock/internal/core"
)

// TestErrors: what a viewer, another team and bad input get, in the
// error types the SDK knows, and that none of it stores anything.
func TestErrors(t *testing.T) {
	e := newEnv(t)
	red, blue := e.team(t, "red"), e.team(t, "blue")
	alice := e.client(t, "alice", red, core.RoleMember)
	viewer := e.client(t, "victor", red, core.RoleViewer)
	bob := e.client(t, "bob", blue, core.RoleMember)
	planArn := buy(t, alice, "red-plan", 1, 4)
	if _, err := alice.CreateTrainingJob(t.Context(), jobInput("red-job", planArn, "sleep", "600")); err != nil {
		t.Fatalf("CreateTrainingJob: %v", err)
	}
	offer := search(t, alice, 1, 2)[0].TrainingPlanOfferingId

	type call func(ctx context.Context) error
	badJob := func(edit func(in *sm.CreateTrainingJobInput)) call {
		return func(ctx context.Context) error {
			in := jobInput("bad-job", planArn, "true")
			edit(in)
			_, err := alice.CreateTrainingJob(ctx, in)
			return err
		}
	}
	for name, tc := range map[string]struct {
		call call
		want string
	}{
		// Another team's plan and job are not found.
		"other team describes plan": {func(ctx context.Context) error {
			_, err := bob.DescribeTrainingPlan(ctx, &sm.DescribeTrainingPlanInput{TrainingPlanName: aws.String("red-plan")})
			return err
		}, "ResourceNotFound"},
		"other team runs on plan": {func(ctx context.Context) error {
			_, err := bob.CreateTrainingJob(ctx, jobInput("blue-job", planArn, "true"))
			return err
		}, "ResourceNotFound"},
		"other team describes job": {func(ctx context.Context) error {
			_, err := bob.DescribeTrainingJob(ctx, &sm.DescribeTrainingJobInput{TrainingJobName: aws.String("red-job")})
			return err
		}, "ResourceNotFound"},
		"other team stops job": {func(ctx context.Context) error {
			_, err := bob.StopTrainingJob(ctx, &sm.StopTrainingJobInput{TrainingJobName: aws.String("red-job")})
			return err
		}, "ResourceNotFound"},
		"plan ARN of another account": {func(ctx context.Context) error {
			_, err := alice.DescribeTrainingPlan(ctx, &sm.DescribeTrainingPlanInput{
				TrainingPlanName: aws.String(strings.Replace(planArn, "123456789012", "999999999999", 1))})
			return err
		}, "ResourceNotFound"},
		// A viewer reads but does not buy, run or stop.
		"viewer buys": {func(ctx context.Context) error {
			_, err := viewer.CreateTrainingPlan(ctx, &sm.CreateTrainingPlanInput{TrainingPlanName: aws.String("v"), TrainingPlanOfferingId: offer})
			return err
		}, "AccessDeniedException"},
		"viewer runs": {func(ctx context.Context) error {
			_, err := viewer.CreateTrainingJob(ctx, jobInput("v-job", planArn, "true"))
			return err
		}, "AccessDeniedException"},
		"viewer stops": {func(ctx context.Context) error {
			_, err := viewer.StopTrainingJob(ctx, &sm.StopTrainingJobInput{TrainingJobName: aws.String("red-job")})
			return err
		}, "AccessDeniedException"},
		// Bad input.
		"unknown instance type": {func(ctx context.Context) error {
			_, err := alice.SearchTrainingPlanOfferings(ctx, &sm.SearchTrainingPlanOfferingsInput{InstanceType: "ml.trn1.32xlarge",
				InstanceCount: aws.Int32(1), DurationHours: aws.Int64(4)})
			return err
		}, "ValidationException"},
		"no instance count": {func(ctx context.Context) error {
			_, err := alice.SearchTrainingPlanOfferings(ctx, &sm.SearchTrainingPlanOfferingsInput{InstanceType: "ml.p5.48xlarge", DurationHours: aws.Int64(4)})
			return err
		}, "ValidationException"},
		"window before its start": {func(ctx context.Context) error {
			_, err := alice.SearchTrainingPlanOfferings(ctx, &sm.SearchTrainingPlanOfferingsInput{InstanceType: "ml.p5.48xlarge",
				InstanceCount: aws.Int32(1), DurationHours: aws.Int64(4), StartTimeAfter: aws.Time(t0.Add(time.Hour)), EndTimeBefore: aws.Time(t0)})
			return err
		}, "ValidationException"},
		"two targets": {func(ctx context.Context) error {
			_, err := alice.SearchTrainingPlanOfferings(ctx, &sm.SearchTrainingPlanOfferingsInput{InstanceType: "ml.p5.48xlarge",
				InstanceCount: aws.Int32(1), DurationHours: aws.Int64(4),
				TargetResources: []types.SageMakerResourceName{types.SageMakerResourceNameTrainingJob, types.SageMakerResourceNameHyperpodCluster}})
			return err
		}, "ValidationException"},
		"forged offering": {func(ctx context.Context) error {
			_, err := alice.CreateTrainingPlan(ctx, &sm.CreateTrainingPlanInput{TrainingPlanName: aws.String("forged"), TrainingPlanOfferingId: aws.String("tpo-AAAA")})
			return err
		}, "ValidationException"},
		"plan name with a space": {func(ctx context.Context) error {
			_, err := alice.CreateTrainingPlan(ctx, &sm.CreateTrainingPlanInput{TrainingPlanName: aws.String("my plan"), TrainingPlanOfferingId: offer})
			return err
		}, "ValidationException"},
		"offering used by another plan": {func(ctx context.Context) error {
			used := search(t, alice, 1, 3)[0].TrainingPlanOfferingId
			if _, err := alice.CreateTrainingPlan(ctx, &sm.CreateTrainingPlanInput{TrainingPlanName: aws.String("once"), TrainingPlanOfferingId: used}); err != nil {
				return err
			}
			_, err := alice.CreateTrainingPlan(ctx, &sm.CreateTrainingPlanInput{TrainingPlanName: aws.String("twice"), TrainingPlanOfferingId: used})
			return err
		}, "ResourceInUse"},
		"job without entrypoint": {badJob(func(in *sm.CreateTrainingJobInput) {
			in.AlgorithmSpecification.ContainerEntrypoint, in.AlgorithmSpecification.ContainerArguments = nil, nil
		}), "ValidationException"},
		"job without plan": {badJob(func(in *sm.CreateTrainingJobInput) { in.ResourceConfig.TrainingPlanArn = nil }), "ValidationException"},
		"job on another type": {badJob(func(in *sm.CreateTrainingJobInput) {
			in.ResourceConfig.InstanceType = types.TrainingInstanceTypeMlP4d24xlarge
		}), "ValidationException"},
		"job larger than its plan": {badJob(func(in *sm.CreateTrainingJobInput) { in.ResourceConfig.InstanceCount = aws.Int32(2) }), "ValidationException"},
		"job on an unknown plan":   {badJob(func(in *sm.CreateTrainingJobInput) { in.ResourceConfig.TrainingPlanArn = aws.String("nope") }), "ResourceNotFound"},
		"job with a bad variable":  {badJob(func(in *sm.CreateTrainingJobInput) { in.Environment = map[string]string{"A=B": "c"} }), "ValidationException"},
		"page size out of range": {func(ctx context.Context) error {
			_, err := alice.ListTrainingJobs(ctx, &sm.ListTrainingJobsInput{MaxResults: aws.Int32(1000)})
			return err
		}, "ValidationException"},
		"made-up page token": {func(ctx context.Context) error {
			_, err := alice.ListTrainingPlans(ctx, &sm.ListTrainingPlansInput{NextToken: aws.String("x")})
			return err
		}, "ValidationException"},
		"unknown job": {func(ctx context.Context) error {
			_, err := alice.DescribeTrainingJob(ctx, &sm.DescribeTrainingJobInput{TrainingJobName: aws.String("nope")})
			return err
		}, "ResourceNotFound"},
		// An operation capblock does not serve.
		"unknown operation": {func(ctx context.Context) error {
			_, err := alice.ListClusters(ctx, &sm.ListClustersInput{})
			return err
		}, "UnknownOperationException"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := errorCode(t, tc.call(t.Context())); got != tc.want {
				t.Errorf("error %s, want %s", got, tc.want)
			}
		})
	}

	// Nothing was bought or created but the plans and job above.
	plans, err := e.svc.ListPlans(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range plans {
		names = append(names, p.Plan.Team+"/"+p.Plan.Name)
	}
	if diff := cmp.Diff([]string{red + "/once", red + "/red-plan"}, slices.Sorted(slices.Values(names))); diff != "" {
		t.Errorf("plans (-want +got):\n%s", diff)
	}
	jobs, err := e.svc.ListJobs(t.Context(), "")
	if err != nil || len(jobs) != 1 || jobs[0].State != core.JobPending {
		t.Errorf("jobs %+v (%v), want red-job pending", jobs, err)
	}

	// No capacity is an empty list of offerings: the demo fleet has 32
	// H100 nodes per zone.
	if got := search(t, alice, 33, 4); len(got) != 0 {
		t.Errorf("%d offerings for 33 nodes", len(got))
	}
	// A viewer reads.
	if _, err := viewer.DescribeTrainingPlan(t.Context(), &sm.DescribeTrainingPlanInput{TrainingPlanName: aws.String("red-plan")}); err != nil {
		t.Errorf("viewer describes: %v", err)
	}
	// Another team lists nothing of red's.
	if out, err := bob.ListTrainingPlans(t.Context(), &sm.ListTrainingPlansInput{}); err != nil || len(out.TrainingPlanSummaries) != 0 {
		t.Errorf("blue lists %v (%v)", out, err)
	}
}

// TestErrorWire: an error is status 400 with the protocol's content type
// and its type in the body and in X-Amzn-ErrorType, as the SDK reads it;
// a body that does not fit says which member is wrong.
func TestErrorWire(t *testing.T) {
	e := newEnv(t)
	e.client(t, "alice", e.team(t, "red"), core.RoleMember) // registers alice's access key
	for name, tc := range map[string]struct {
		op, body string
		want     string // the body answered
	}{
		"not found":      {"DescribeTrainingJob", `{"TrainingJobName":"nope"}`, `{"__type":"ResourceNotFound","Message":"training job nope not found"}`},
		"not JSON":       {"ListTrainingJobs", `{"MaxResults":`, `{"__type":"ValidationException","Message":"the request body is not valid JSON (at byte 14)"}`},
		"not an object":  {"ListTrainingJobs", `[1]`, `{"__type":"ValidationException","Message":"the request body must be a JSON object, not a JSON array"}`},
		"wrong type":     {"ListTrainingJobs", `{"MaxResults":"ten"}`, `{"__type":"ValidationException","Message":"member MaxResults: want a whole number, not a JSON string"}`},
		"bad timestamp":  {"ListTrainingJobs", `{"CreationTimeAfter":"yesterday"}`, `{"__type":"ValidationException","Message":"a timestamp must be seconds since 1970, as a number; got \"yesterday\""}`},
		"unknown member": {"ListTrainingJobs", `{"Color":"blue","MaxResults":0}`, `{"__type":"ValidationException","Message":"MaxResults 0: want 1 to 100"}`},
		"unknown op":     {"DeleteTrainingJob", `{}`, `{"__type":"UnknownOperationException","Message":"operation \"DeleteTrainingJob\" is not supported by capblock's SageMaker endpoint"}`},
	} {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, e.srv.URL, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Amz-Target", "SageMaker."+tc.op)
			req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDALICE/20261201/eu-west-1/sagemaker/aws4_request")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			var typ struct {
				Type string `json:"__type"`
			}
			_ = json.Unmarshal(body, &typ)
			got := []string{resp.Status, resp.Header.Get("Content-Type"), resp.Header.Get("X-Amzn-ErrorType"), string(body)}
			want := []string{"400 Bad Request", "application/x-amz-json-1.1", typ.Type, tc.want}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestAccessRules: each operation calls a use case of contract's access
// table, the one that decides who may.
func TestAccessRules(t *testing.T) {
	for name, rule := range sagemaker.AccessRules() {
		if _, ok := contract.RuleOf(rule.UseCase); !ok {
			t.Errorf("%s calls use case %s, which has no access rule", name, rule.UseCase)
		}
	}
}
