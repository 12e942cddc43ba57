package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/smithy-go"
)

// TestAWSThroughServe: `capblock serve` answers AWS's protocols at /aws
// with the access keys `capblock access-keys` makes: the real SDK's EC2
// client searches and buys a capacity block and sees it, the SageMaker
// client searches and buys a training plan; the purchase is in the audit
// log; another team's key sees neither; a wrong secret is refused, and
// so are a disabled user's key and a disabled team's, saying so, and a
// revoked key, each in its protocol's words.
func TestAWSThroughServe(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server binary")
	}
	a := startAWS(t)
	srv, cli, team, key, ec2c, smc := a.srv, a.cli, a.team, a.key, a.ec2, a.sm
	var err error
	ctx := t.Context()

	offers, err := ec2c.DescribeCapacityBlockOfferings(ctx, &ec2.DescribeCapacityBlockOfferingsInput{
		InstanceType: aws.String("g6.xlarge"), InstanceCount: aws.Int32(1), CapacityDurationHours: aws.Int32(4),
		StartDateRange: aws.Time(t0.Add(2 * time.Hour)), EndDateRange: aws.Time(t0.Add(48 * time.Hour)),
	})
	if err != nil || len(offers.CapacityBlockOfferings) == 0 {
		t.Fatalf("DescribeCapacityBlockOfferings: %v, %+v", err, offers)
	}
	bought, err := ec2c.PurchaseCapacityBlock(ctx, &ec2.PurchaseCapacityBlockInput{
		CapacityBlockOfferingId: offers.CapacityBlockOfferings[0].CapacityBlockOfferingId, InstancePlatform: "Linux/UNIX",
	})
	if err != nil || bought.CapacityReservation == nil {
		t.Fatalf("PurchaseCapacityBlock: %v", err)
	}
	id := aws.ToString(bought.CapacityReservation.CapacityReservationId)
	if !strings.Contains(cli("blocks", "show", id), `"team": "`+team.ID+`"`) {
		t.Errorf("block %s is not ada's team's", id)
	}
	if !strings.Contains(cli("audit"), "/aws EC2 PurchaseCapacityBlock") {
		t.Error("the purchase is not in the audit log")
	}
	plans, err := smc.SearchTrainingPlanOfferings(ctx, &sm.SearchTrainingPlanOfferingsInput{
		InstanceType: "ml.p5.48xlarge", InstanceCount: aws.Int32(1), DurationHours: aws.Int64(8),
		StartTimeAfter: aws.Time(t0.Add(2 * time.Hour)), EndTimeBefore: aws.Time(t0.Add(72 * time.Hour)),
		TargetResources: nil,
	})
	if err != nil || len(plans.TrainingPlanOfferings) == 0 {
		t.Fatalf("SearchTrainingPlanOfferings: %v, %+v", err, plans)
	}

	plan, err := smc.CreateTrainingPlan(ctx, &sm.CreateTrainingPlanInput{TrainingPlanName: aws.String("llm-run"),
		TrainingPlanOfferingId: plans.TrainingPlanOfferings[0].TrainingPlanOfferingId})
	if err != nil || aws.ToString(plan.TrainingPlanArn) == "" {
		t.Fatalf("CreateTrainingPlan: %v", err)
	}
	if _, err := smc.DescribeTrainingPlan(ctx, &sm.DescribeTrainingPlanInput{TrainingPlanName: aws.String("llm-run")}); err != nil {
		t.Fatalf("DescribeTrainingPlan: %v", err)
	}

	// Another team's key sees neither the reservation nor the plan; a
	// wrong secret is refused by both protocols.
	var other struct{ ID string }
	must(t, json.Unmarshal([]byte(cli("teams", "create", "vision")), &other))
	cli("users", "create", "grace", "--team", other.ID, "--role", "member")
	var otherKey struct{ AccessKeyID, SecretAccessKey string }
	must(t, json.Unmarshal([]byte(cli("access-keys", "create", "--user", "grace")), &otherKey))
	otherCreds := credentials.NewStaticCredentialsProvider(otherKey.AccessKeyID, otherKey.SecretAccessKey, "")
	otherEC2 := ec2.New(ec2.Options{Region: "eu-west-1", BaseEndpoint: aws.String(srv.url + "/aws"), Credentials: otherCreds})
	otherSM := sm.New(sm.Options{Region: "eu-west-1", BaseEndpoint: aws.String(srv.url + "/aws"), Credentials: otherCreds})
	code := func(err error) string {
		var api smithy.APIError
		if errors.As(err, &api) {
			return api.ErrorCode()
		}
		return fmt.Sprint(err)
	}
	_, err = otherEC2.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{id}})
	if got := code(err); got != "InvalidCapacityReservationId.NotFound" {
		t.Errorf("another team's reservation: %s", got)
	}
	_, err = otherSM.DescribeTrainingPlan(ctx, &sm.DescribeTrainingPlanInput{TrainingPlanName: plan.TrainingPlanArn})
	if got := code(err); got != "ResourceNotFound" {
		t.Errorf("another team's plan: %s", got)
	}
	wrong := credentials.NewStaticCredentialsProvider(key.AccessKeyID, "not-the-secret", "")
	_, err = ec2.New(ec2.Options{Region: "eu-west-1", BaseEndpoint: aws.String(srv.url + "/aws"), Credentials: wrong}).
		DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{})
	if got := code(err); got != "SignatureDoesNotMatch" {
		t.Errorf("EC2 with a wrong secret: %s", got)
	}
	_, err = sm.New(sm.Options{Region: "eu-west-1", BaseEndpoint: aws.String(srv.url + "/aws"), Credentials: wrong}).
		ListTrainingPlans(ctx, &sm.ListTrainingPlansInput{})
	if got := code(err); got != "InvalidSignatureException" {
		t.Errorf("SageMaker with a wrong secret: %s", got)
	}

	// refused checks that both protocols refuse ada's key saying why.
	refused := func(what, why string) {
		t.Helper()
		_, err := ec2c.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{})
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != "AuthFailure" || !strings.Contains(api.ErrorMessage(), why) {
			t.Errorf("EC2, %s: %v; want AuthFailure saying %q", what, err, why)
		}
		_, err = smc.ListTrainingPlans(ctx, &sm.ListTrainingPlansInput{})
		if !errors.As(err, &api) || api.ErrorCode() != "UnrecognizedClientException" || !strings.Contains(api.ErrorMessage(), why) {
			t.Errorf("SageMaker, %s: %v; want UnrecognizedClientException saying %q", what, err, why)
		}
	}
	works := func(what string) {
		t.Helper()
		if _, err := ec2c.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{}); err != nil {
			t.Fatalf("EC2, %s: %v", what, err)
		}
		if _, err := smc.ListTrainingPlans(ctx, &sm.ListTrainingPlansInput{}); err != nil {
			t.Fatalf("SageMaker, %s: %v", what, err)
		}
	}
	cli("users", "disable", "ada")
	refused("a disabled user's key", "user ada was disabled")
	cli("users", "enable", "ada")
	works("the user enabled again")
	cli("teams", "disable", "research")
	refused("a disabled team's key", "team research was disabled")
	cli("teams", "enable", "research")
	works("the team enabled again")
	cli("access-keys", "revoke", key.ID, "--yes")
	refused("a revoked key", "unknown or revoked")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// awsEnv is `capblock serve` with team research, its member ada, an
// access key of ada's and the SDK's EC2 and SageMaker clients signing
// with it.
type awsEnv struct {
	srv  *process
	cli  func(args ...string) string // the CLI as the admin, -o json
	team struct{ ID string }
	key  struct{ ID, AccessKeyID, SecretAccessKey string }
	ec2  *ec2.Client
	sm   *sm.Client
}

func startAWS(t *testing.T) awsEnv {
	t.Helper()
	bin, dir := buildBinary(t), t.TempDir()
	a := awsEnv{srv: startProcess(t, bin, filepath.Join(dir, "capblock.db"), ts(t0))}
	token, err := os.ReadFile(filepath.Join(dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	a.cli = func(args ...string) string {
		t.Helper()
		out, errOut, code := runCLI(t, bin, a.srv.url, string(token), append([]string{"-o", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("capblock %v: exit %d: %s", args, code, errOut)
		}
		return out
	}
	must(t, json.Unmarshal([]byte(a.cli("teams", "create", "research")), &a.team))
	a.cli("users", "create", "ada", "--team", a.team.ID, "--role", "member")
	must(t, json.Unmarshal([]byte(a.cli("access-keys", "create", "--user", "ada")), &a.key))
	if a.key.AccessKeyID == "" || a.key.SecretAccessKey == "" {
		t.Fatalf("access key: %+v", a.key)
	}
	creds := credentials.NewStaticCredentialsProvider(a.key.AccessKeyID, a.key.SecretAccessKey, "")
	a.ec2 = ec2.New(ec2.Options{Region: "eu-west-1", BaseEndpoint: aws.String(a.srv.url + "/aws"), Credentials: creds})
	a.sm = sm.New(sm.Options{Region: "eu-west-1", BaseEndpoint: aws.String(a.srv.url + "/aws"), Credentials: creds})
	return a
}
