package sagemaker_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/smithy-go"

	"capblock/internal/awsapi/sagemaker"
	"capblock/internal/clock"
	"capblock/internal/core"
	"capblock/internal/fleet"
	"capblock/internal/service"
	"capblock/internal/store/sqlite"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// awsNames are the AWS names of the demo fleet's types that the tests
// use, as the integrating server maps them.
var awsNames = map[string]string{"ml.p5.48xlarge": "h100.8x", "ml.p4d.24xlarge": "a100.8x"}

// env is a real service on SQLite with the demo fleet and a simulated
// clock, behind a stand-in for the /aws endpoint: that endpoint (built
// elsewhere) verifies the SigV4 signature and finds the caller from the
// access key; the stand-in verifies nothing and takes the caller named
// by the request's access key id from principals, then dispatches on
// X-Amz-Target to Handler.Serve as the endpoint does.
type env struct {
	svc *service.Service
	sim *clock.Sim
	srv *httptest.Server

	mu         sync.Mutex
	principals map[string]core.Principal // by access key id
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "capblock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sim := clock.NewSim(t0)
	svc, err := service.New(ctx, service.Config{Fleet: fleet.Demo(), Store: st, Clock: sim, JobsDir: t.TempDir(),
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// The reconciler moves blocks and jobs on as the clock moves.
	runCtx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		svc.Run(runCtx)
	}()
	t.Cleanup(func() { cancel(); <-ran })
	reverse := map[string]string{}
	for k, v := range awsNames {
		reverse[v] = k
	}
	h := sagemaker.New(svc.Guarded(), svc.Now, sagemaker.Options{
		InstanceType: func(n string) (string, bool) { t, ok := awsNames[n]; return t, ok },
		AWSName:      func(t string) string { return reverse[t] },
		Region:       "eu-west-1", Account: "123456789012",
	})
	e := &env{svc: svc, sim: sim, principals: map[string]core.Principal{}}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := e.caller(r)
		if !ok {
			http.Error(w, "unknown access key", http.StatusForbidden)
			return
		}
		op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "SageMaker.")
		if !ok {
			http.Error(w, "not a SageMaker call", http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.Serve(w, r, p, op, body)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

// caller is the principal of the request's access key id, read from its
// SigV4 Authorization header (Credential=<key>/<date>/...).
func (e *env) caller(r *http.Request) (core.Principal, bool) {
	_, cred, _ := strings.Cut(r.Header.Get("Authorization"), "Credential=")
	key, _, _ := strings.Cut(cred, "/")
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.principals[key]
	return p, ok
}

// client is a SageMaker client of the AWS SDK for a user of team with
// role, against the stand-in endpoint.
func (e *env) client(t *testing.T, name, team string, role core.Role) *sm.Client {
	t.Helper()
	key := "AKID" + strings.ToUpper(name)
	e.mu.Lock()
	e.principals[key] = core.Principal{User: core.User{ID: "usr-" + name, Name: name, Team: team, Role: role}}
	e.mu.Unlock()
	return sm.New(sm.Options{
		Region:       "eu-west-1",
		BaseEndpoint: aws.String(e.srv.URL),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: key, SecretAccessKey: "secret"}, nil
		}),
		RetryMaxAttempts: 1,
	})
}

// team creates a team and returns its id.
func (e *env) team(t *testing.T, name string) string {
	t.Helper()
	tm, err := e.svc.CreateTeam(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return tm.ID
}

// search finds plan offerings of count ml.p5.48xlarge for hours within
// the next week.
func search(t *testing.T, c *sm.Client, count int32, hours int64) []types.TrainingPlanOffering {
	t.Helper()
	out, err := c.SearchTrainingPlanOfferings(t.Context(), &sm.SearchTrainingPlanOfferingsInput{
		InstanceType: "ml.p5.48xlarge", InstanceCount: aws.Int32(count), DurationHours: aws.Int64(hours),
		StartTimeAfter: aws.Time(t0), EndTimeBefore: aws.Time(t0.Add(7 * 24 * time.Hour)),
		TargetResources: []types.SageMakerResourceName{types.SageMakerResourceNameTrainingJob},
	})
	if err != nil {
		t.Fatalf("SearchTrainingPlanOfferings: %v", err)
	}
	return out.TrainingPlanOfferings
}

// buy buys the first offering of a search under name and returns its ARN.
func buy(t *testing.T, c *sm.Client, name string, count int32, hours int64) string {
	t.Helper()
	offers := search(t, c, count, hours)
	if len(offers) == 0 {
		t.Fatal("no offering")
	}
	out, err := c.CreateTrainingPlan(t.Context(), &sm.CreateTrainingPlanInput{TrainingPlanName: aws.String(name),
		TrainingPlanOfferingId: offers[0].TrainingPlanOfferingId})
	if err != nil {
		t.Fatalf("CreateTrainingPlan: %v", err)
	}
	return aws.ToString(out.TrainingPlanArn)
}

// jobInput is a training job on plan running command.
func jobInput(name, plan string, command ...string) *sm.CreateTrainingJobInput {
	return &sm.CreateTrainingJobInput{
		TrainingJobName: aws.String(name),
		RoleArn:         aws.String("arn:aws:iam::123456789012:role/unused"),
		AlgorithmSpecification: &types.AlgorithmSpecification{TrainingInputMode: types.TrainingInputModeFile,
			TrainingImage: aws.String("ignored:latest"), ContainerEntrypoint: command[:1], ContainerArguments: command[1:]},
		OutputDataConfig: &types.OutputDataConfig{S3OutputPath: aws.String("s3://unused/out")},
		ResourceConfig: &types.ResourceConfig{InstanceType: types.TrainingInstanceTypeMlP548xlarge, InstanceCount: aws.Int32(1),
			VolumeSizeInGB: aws.Int32(100), TrainingPlanArn: aws.String(plan)},
		StoppingCondition: &types.StoppingCondition{MaxRuntimeInSeconds: aws.Int32(3600)},
		Environment:       map[string]string{"MODE": "test"},
		HyperParameters:   map[string]string{"epochs": "3"},
		RetryStrategy:     &types.RetryStrategy{MaximumRetryAttempts: aws.Int32(2)},
	}
}

// errorCode is the error code an SDK call failed with.
func errorCode(t *testing.T, err error) string {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("want an API error, got %v", err)
	}
	return ae.ErrorCode()
}

// eventually polls done until it holds, for at most 30 s: the service's
// reconciler and the job's process act shortly after the clock moves.
func eventually(t *testing.T, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30 s until %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
