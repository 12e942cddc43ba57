package awsapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"capblock/internal/awsapi"
	"capblock/internal/core"
)

// sageMakerCalls records the calls handed to the SageMaker front end,
// which answers each with {}.
type sageMakerCalls struct {
	calls chan sageMakerCall
}

type sageMakerCall struct {
	user, op, body string
}

func (s *sageMakerCalls) Serve(w http.ResponseWriter, r *http.Request, p core.Principal, op string, body []byte) {
	again, _ := io.ReadAll(r.Body)
	if string(again) != string(body) {
		http.Error(w, "r.Body is not the body", http.StatusInternalServerError)
		return
	}
	s.calls <- sageMakerCall{user: p.User.Name, op: op, body: string(body)}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_, _ = w.Write([]byte("{}"))
}

// jsonCall posts a JSON 1.1 call signed by the SDK's signer for service
// with the key id and secret, and returns the status and the body.
func (e *env) jsonCall(t *testing.T, target, body, id, secret, service string) (int, map[string]string) {
	t.Helper()
	r, err := http.NewRequest(http.MethodPost, e.url+"/aws/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/x-amz-json-1.1")
	r.Header.Set("X-Amz-Target", target)
	sum := sha256.Sum256([]byte(body))
	creds := aws.Credentials{AccessKeyID: id, SecretAccessKey: secret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, hex.EncodeToString(sum[:]), service, "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("the answer is not JSON: %v", err)
	}
	return resp.StatusCode, out
}

// TestJSONProtocol: SageMaker's calls reach the SageMaker front end
// authenticated, and are refused in JSON 1.1's shape otherwise.
func TestJSONProtocol(t *testing.T) {
	sm := &sageMakerCalls{calls: make(chan sageMakerCall, 1)}
	e := newEnv(t, awsapi.Options{SageMaker: sm})
	const body = `{"MaxResults": 10}`
	status, out := e.jsonCall(t, "SageMaker.ListTrainingPlans", body, memberKey, secretOf(memberKey), "sagemaker")
	if status != http.StatusOK {
		t.Fatalf("status %d %v", status, out)
	}
	if got := <-sm.calls; got != (sageMakerCall{user: "ann", op: "ListTrainingPlans", body: body}) {
		t.Errorf("SageMaker got %+v", got)
	}
	for name, tc := range map[string]struct {
		target, id, secret, service string
		status                      int
		code                        string
	}{
		"wrong secret":         {"SageMaker.ListTrainingPlans", memberKey, "guess", "sagemaker", http.StatusBadRequest, "InvalidSignatureException"},
		"unknown key":          {"SageMaker.ListTrainingPlans", "AKIANOSUCHKEY0000001", "guess", "sagemaker", http.StatusBadRequest, "UnrecognizedClientException"},
		"signed for EC2":       {"SageMaker.ListTrainingPlans", memberKey, secretOf(memberKey), "ec2", http.StatusBadRequest, "InvalidSignatureException"},
		"another JSON service": {"AmazonSSM.ListDocuments", memberKey, secretOf(memberKey), "sagemaker", http.StatusBadRequest, "UnknownOperationException"},
	} {
		status, out := e.jsonCall(t, tc.target, body, tc.id, tc.secret, tc.service)
		if status != tc.status || out["__type"] != tc.code || out["message"] == "" {
			t.Errorf("%s: %d %v, want %d %s", name, status, out, tc.status, tc.code)
		}
	}
	if len(sm.calls) != 0 {
		t.Errorf("a refused call reached SageMaker: %+v", <-sm.calls)
	}

	// Without a SageMaker front end, its calls are unknown.
	bare := newEnv(t, awsapi.Options{})
	status, out = bare.jsonCall(t, "SageMaker.ListTrainingPlans", body, memberKey, secretOf(memberKey), "sagemaker")
	if status != http.StatusBadRequest || out["__type"] != "UnknownOperationException" {
		t.Errorf("no SageMaker: %d %v", status, out)
	}
}

// TestUnsignedEC2: a request without a signature is refused in EC2's
// XML shape, with a request id.
func TestUnsignedEC2(t *testing.T) {
	e := newEnv(t, awsapi.Options{})
	resp, err := http.Post(e.url+"/aws", "application/x-www-form-urlencoded", strings.NewReader("Action=DescribeCapacityBlocks&Version=2016-11-15"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "<Response><Errors><Error><Code>MissingAuthenticationToken</Code>") ||
		!strings.Contains(string(body), "<RequestID>") {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}
