package awsapi_test

import (
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"capblock/internal/awsapi"
	"capblock/internal/httpx"
)

// TestRateLimit: a user past its burst is throttled in each protocol's
// words, which the SDKs retry with backoff: EC2's RequestLimitExceeded,
// JSON 1.1's ThrottlingException. Requests with a made-up key count
// against their client address, apart from the users'; the limiter is
// the one given, which the REST API takes from too.
func TestRateLimit(t *testing.T) {
	limiter := httpx.NewLimiter(0.01, 3)
	e := newEnv(t, awsapi.Options{Limiter: limiter})
	c := ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: aws.String(e.url + "/aws"), RetryMaxAttempts: 1,
		Credentials: e.ec2(memberKey).Options().Credentials})
	describe := func() error {
		_, err := c.DescribeCapacityReservations(t.Context(), &ec2.DescribeCapacityReservationsInput{})
		return err
	}
	for i := range 3 {
		if err := describe(); err != nil {
			t.Fatalf("request %d, within the burst: %v", i+1, err)
		}
	}
	wantCode(t, "past the burst", describe(), "RequestLimitExceeded")
	status, out := e.jsonCall(t, "SageMaker.ListTrainingPlans", "{}", memberKey, secretOf(memberKey), "sagemaker")
	if status != http.StatusBadRequest || out["__type"] != "ThrottlingException" {
		t.Fatalf("a JSON call past the burst: %d %v, want 400 ThrottlingException", status, out)
	}
	// Another user has a budget of its own.
	if err := describeWith(t, e.ec2(viewerKey)); err != nil {
		t.Fatalf("another user: %v", err)
	}
	// Made-up keys are counted by address: three refused, then throttled.
	noSuchKey := e.ec2("AKIANOSUCHKEY0000001", "whatever")
	for range 3 {
		wantCode(t, "unknown key", describeWith(t, noSuchKey), "AuthFailure")
	}
	wantCode(t, "unknown key past the burst", describeWith(t, noSuchKey), "RequestLimitExceeded")
	// The limiter is shared: a user whose budget another front end spent
	// is throttled here.
	bob := e.principal(betaKey)
	for range 3 {
		limiter.Allow(httpx.UserKey(bob.User.ID))
	}
	wantCode(t, "a user whose REST requests spent its budget", describeWith(t, e.ec2(betaKey)), "RequestLimitExceeded")
}

func describeWith(t *testing.T, c *ec2.Client) error {
	_, err := c.DescribeCapacityReservations(t.Context(), &ec2.DescribeCapacityReservationsInput{})
	return err
}
