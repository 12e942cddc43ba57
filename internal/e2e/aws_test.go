package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
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
// client searches training plans; the purchase is in the audit log; a
// revoked key and a disabled user are refused with AuthFailure.
func TestAWSThroughServe(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server binary")
	}
	bin, dir := buildBinary(t), t.TempDir()
	srv := startProcess(t, bin, filepath.Join(dir, "capblock.db"), ts(t0))
	token, err := os.ReadFile(filepath.Join(dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--url", srv.url, "--token", strings.TrimSpace(string(token)), "-o", "json"}, args...)...)
		out, err := cmd.Output()
		if err != nil {
			var x *exec.ExitError
			if errors.As(err, &x) {
				t.Fatalf("capblock %v: %v: %s", args, err, x.Stderr)
			}
			t.Fatal(err)
		}
		return string(out)
	}
	var team struct{ ID string }
	must(t, json.Unmarshal([]byte(cli("teams", "create", "research")), &team))
	var member struct{ ID string }
	must(t, json.Unmarshal([]byte(cli("users", "create", "ada", "--team", team.ID, "--role", "member")), &member))
	var key struct {
		ID, AccessKeyID, SecretAccessKey string
	}
	must(t, json.Unmarshal([]byte(cli("access-keys", "create", "--user", "ada")), &key))
	if key.AccessKeyID == "" || key.SecretAccessKey == "" {
		t.Fatalf("access key: %+v", key)
	}
	creds := credentials.NewStaticCredentialsProvider(key.AccessKeyID, key.SecretAccessKey, "")
	ec2c := ec2.New(ec2.Options{Region: "eu-west-1", BaseEndpoint: aws.String(srv.url + "/aws"), Credentials: creds})
	smc := sm.New(sm.Options{Region: "eu-west-1", BaseEndpoint: aws.String(srv.url + "/aws"), Credentials: creds})
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

	refused := func(what string) {
		t.Helper()
		_, err := ec2c.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{})
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != "AuthFailure" {
			t.Errorf("%s: %v; want AuthFailure", what, err)
		}
	}
	cli("users", "disable", "ada")
	refused("a disabled user's key")
	cli("users", "enable", "ada")
	if _, err := ec2c.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{}); err != nil {
		t.Fatalf("enabled again: %v", err)
	}
	cli("access-keys", "revoke", key.ID)
	refused("a revoked key")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
