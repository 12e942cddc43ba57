package awsapi_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"

	"capblock/internal/awsapi"
)

// TestDisabledKey: a disabled user's key, well signed, is refused in
// each protocol's terms with the reason the service gives, as REST says
// it; signed with a wrong secret, it is refused as any bad signature,
// without the reason; enabled again, it works.
func TestDisabledKey(t *testing.T) {
	sm := &sageMakerCalls{calls: make(chan sageMakerCall, 1)}
	e := newEnv(t, awsapi.Options{SageMaker: sm})
	ctx := context.Background()
	describe := func(secret string) error {
		_, err := e.ec2(memberKey, secret).DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{})
		return err
	}
	const why = "user ann was disabled at 2026-12-01T00:00:00Z; an administrator can enable it"
	e.keys.disable(memberKey, why)

	var api smithy.APIError
	if err := describe(secretOf(memberKey)); !errors.As(err, &api) || api.ErrorCode() != "AuthFailure" || !strings.Contains(api.ErrorMessage(), why) {
		t.Errorf("EC2, a disabled user's key: %v; want AuthFailure saying %q", err, why)
	}
	status, out := e.jsonCall(t, "SageMaker.ListTrainingPlans", "{}", memberKey, secretOf(memberKey), "sagemaker")
	if status != http.StatusBadRequest || out["__type"] != "UnrecognizedClientException" || !strings.Contains(out["message"], why) {
		t.Errorf("SageMaker, a disabled user's key: %d %v; want UnrecognizedClientException saying %q", status, out, why)
	}
	if err := describe("guess"); !errors.As(err, &api) || api.ErrorCode() != "SignatureDoesNotMatch" || strings.Contains(api.ErrorMessage(), "disabled") {
		t.Errorf("EC2, a disabled user's key with a wrong secret: %v; want SignatureDoesNotMatch, not the reason", err)
	}
	status, out = e.jsonCall(t, "SageMaker.ListTrainingPlans", "{}", memberKey, "guess", "sagemaker")
	if out["__type"] != "InvalidSignatureException" || strings.Contains(out["message"], "disabled") {
		t.Errorf("SageMaker, a disabled user's key with a wrong secret: %d %v; want InvalidSignatureException, not the reason", status, out)
	}
	if len(sm.calls) != 0 {
		t.Errorf("a refused call reached SageMaker: %+v", <-sm.calls)
	}

	e.keys.disable(memberKey, "")
	if err := describe(secretOf(memberKey)); err != nil {
		t.Errorf("enabled again: %v", err)
	}
	// An unknown key keeps its answer.
	_, err := e.ec2("AKIANOSUCHKEY0000001", "guess").DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{})
	if !errors.As(err, &api) || api.ErrorCode() != "AuthFailure" || !strings.Contains(api.ErrorMessage(), "unknown or revoked") {
		t.Errorf("an unknown key: %v", err)
	}
}
