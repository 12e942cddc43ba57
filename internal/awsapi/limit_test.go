package awsapi_test

import (
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"capblock/internal/awsapi"
)

// TestRateLimit: a client address past its burst is throttled in each
// protocol's words, which the SDKs retry with backoff: EC2's
// RequestLimitExceeded, JSON 1.1's ThrottlingException. A request with a
// made-up key counts as much as a signed one: the limit comes first.
func TestRateLimit(t *testing.T) {
	e := newEnv(t, awsapi.Options{RateLimit: 0.01, RateBurst: 3})
	c := ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: aws.String(e.url + "/aws"), RetryMaxAttempts: 1,
		Credentials: e.ec2(memberKey).Options().Credentials})
	describe := func() error {
		_, err := c.DescribeCapacityReservations(t.Context(), &ec2.DescribeCapacityReservationsInput{})
		return err
	}
	if err := describe(); err != nil {
		t.Fatalf("first request: %v", err)
	}
	// A made-up key takes the second.
	wantCode(t, "unknown key", describeWith(t, e.ec2("AKIANOSUCHKEY0000001", "whatever")), "AuthFailure")
	if err := describe(); err != nil {
		t.Fatalf("third request, within the burst: %v", err)
	}
	wantCode(t, "past the burst", describe(), "RequestLimitExceeded")
	status, out := e.jsonCall(t, "SageMaker.ListTrainingPlans", "{}", memberKey, secretOf(memberKey), "sagemaker")
	if status != http.StatusBadRequest || out["__type"] != "ThrottlingException" {
		t.Fatalf("a JSON call past the burst: %d %v, want 400 ThrottlingException", status, out)
	}
}

func describeWith(t *testing.T, c *ec2.Client) error {
	_, err := c.DescribeCapacityReservations(t.Context(), &ec2.DescribeCapacityReservationsInput{})
	return err
}
