package awsapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"capblock/internal/awsapi"
	"capblock/internal/awsapi/sagemaker"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/service"
)

// The principals of the AWS matrix: no signature, a key of each role, a
// key whose user is disabled, and a revoked key.
const (
	asNobody   = "no signature"
	asDisabled = "disabled user"
	asRevoked  = "revoked key"
	disabledK  = "AKIAALPHADISABLED001"
	revokedK   = "AKIAALPHAREVOKED0001"
)

// matrixPrincipal is one row of the matrix: the key it signs with and
// the role it holds ("" for none).
type matrixPrincipal struct {
	name string
	key  string
	role core.Role
}

var matrixPrincipals = []matrixPrincipal{
	{asNobody, "", ""},
	{"viewer", viewerKey, core.RoleViewer},
	{"member", memberKey, core.RoleMember},
	{"admin", adminKey, core.RoleAdmin},
	{asDisabled, disabledK, core.RoleMember},
	{asRevoked, revokedK, core.RoleMember},
}

// TestAWSAuthorizationMatrix asks every EC2 action and every SageMaker
// operation as each principal, and expects what contract's access table
// says of the use case each calls: no signature, a disabled user's key
// and a revoked key are refused as unauthenticated, a role below the use
// case's is refused as unauthorized, and the others are let through (an
// EC2 dry run answers DryRunOperation; a SageMaker call answers anything
// but a refusal). A member of another team finds none of the team's
// things.
func TestAWSAuthorizationMatrix(t *testing.T) {
	e := newEnvWith(t, awsapi.Options{}, func(svc *service.Service) awsapi.JSONService {
		return sagemaker.New(svc.Guarded(), svc.Now, sagemaker.Options{})
	})
	e.addKey(disabledK, "dora", e.alpha.ID, core.RoleMember)
	e.keys.disable(disabledK, "user dora was disabled at 2026-12-01T00:00:00Z; an administrator can enable it")
	e.addKey(revokedK, "rex", e.alpha.ID, core.RoleMember)
	e.keys.revoke(revokedK)

	cells := 0
	for action, uc := range awsapi.EC2UseCases() {
		rule, ok := contract.RuleOf(uc)
		if !ok {
			t.Errorf("EC2 %s calls %s, which has no rule", action, uc)
			continue
		}
		for _, p := range matrixPrincipals {
			status, code, msg := e.ec2Raw(t, p.key, url.Values{"Action": {action}, "Version": {"2016-11-15"}, "DryRun": {"true"}})
			cells++
			var want []string
			switch {
			case p.name == asNobody:
				want = []string{"MissingAuthenticationToken"}
			case p.name == asDisabled || p.name == asRevoked:
				want = []string{"AuthFailure"}
			case !p.role.Allows(rule.Role):
				want = []string{"UnauthorizedOperation"}
			default:
				want = []string{"DryRunOperation"}
			}
			if !slices.Contains(want, code) {
				t.Errorf("EC2 %s (%s, %s) as %s: %d %s %q, want %v", action, uc, rule.Role, p.name, status, code, msg, want)
			}
			if p.name == asDisabled && !strings.Contains(msg, "disabled") {
				t.Errorf("EC2 %s as a disabled user: %q does not say the user is disabled", action, msg)
			}
		}
	}
	for op, rule := range sagemaker.AccessRules() {
		r, ok := contract.RuleOf(rule.UseCase)
		if !ok {
			t.Errorf("SageMaker %s calls %s, which has no rule", op, rule.UseCase)
			continue
		}
		for _, p := range matrixPrincipals {
			status, code, msg := e.jsonRaw(t, p.key, "SageMaker."+op, `{}`)
			cells++
			refusals := []string{"MissingAuthenticationTokenException", "UnrecognizedClientException", "AccessDeniedException"}
			switch {
			case p.name == asNobody:
				if code != "MissingAuthenticationTokenException" {
					t.Errorf("SageMaker %s as %s: %d %s %q, want MissingAuthenticationTokenException", op, p.name, status, code, msg)
				}
			case p.name == asDisabled || p.name == asRevoked:
				if code != "UnrecognizedClientException" {
					t.Errorf("SageMaker %s as %s: %d %s %q, want UnrecognizedClientException", op, p.name, status, code, msg)
				}
				if p.name == asDisabled && !strings.Contains(msg, "disabled") {
					t.Errorf("SageMaker %s as a disabled user: %q does not say the user is disabled", op, msg)
				}
			case !p.role.Allows(r.Role):
				if code != "AccessDeniedException" {
					t.Errorf("SageMaker %s (%s, %s) as %s: %d %s %q, want AccessDeniedException", op, rule.UseCase, r.Role, p.name, status, code, msg)
				}
			default:
				if slices.Contains(refusals, code) {
					t.Errorf("SageMaker %s (%s, %s) as %s: refused, %d %s %q", op, rule.UseCase, r.Role, p.name, status, code, msg)
				}
			}
		}
	}
	t.Logf("%d EC2 actions and %d SageMaker operations × %d principals: %d cells",
		len(awsapi.EC2UseCases()), len(sagemaker.AccessRules()), len(matrixPrincipals), cells)

	// Another team's block: not found to a member of beta (an error, or
	// an empty set for a description), whatever the action, and left as
	// it was.
	id := e.buyForAlpha(t)
	for action, params := range map[string]url.Values{
		"CancelCapacityReservation":               {"CapacityReservationId": {id}},
		"DescribeCapacityBlockExtensionOfferings": {"CapacityReservationId": {id}, "CapacityBlockExtensionDurationHours": {"1"}},
		"DescribeCapacityBlockStatus":             {"CapacityBlockId": {id}},
		"DescribeCapacityReservations":            {"CapacityReservationId": {id}},
	} {
		params.Set("Action", action)
		params.Set("Version", "2016-11-15")
		status, code, msg := e.ec2Raw(t, betaKey, params)
		if (status == http.StatusOK && strings.Contains(msg, id)) || (status != http.StatusOK && !strings.Contains(code, "NotFound")) {
			t.Errorf("EC2 %s of team alpha's %s as a member of beta: %d %s %q, want a not-found error", action, id, status, code, msg)
		}
	}
	if b, err := e.svc.GetBlock(context.Background(), "", id); err != nil || b.State != core.StateScheduled {
		t.Errorf("alpha's block after beta's attempts: %s, %v", b.State, err)
	}
}

// addKey makes a user and an access key that acts as it.
func (e *env) addKey(key, name, team string, role core.Role) {
	e.t.Helper()
	u, err := e.svc.CreateUser(context.Background(), name, team, role)
	if err != nil {
		e.t.Fatal(err)
	}
	e.keys.mu.Lock()
	defer e.keys.mu.Unlock()
	e.keys.keys[key] = accessKey{secret: secretOf(key), p: core.Principal{User: u, TokenID: key}}
}

// buyForAlpha buys an l4 block for team alpha, as alpha's member, and
// returns its id.
func (e *env) buyForAlpha(t *testing.T) string {
	t.Helper()
	status, code, msg := e.ec2Raw(t, memberKey, url.Values{"Action": {"DescribeCapacityBlockOfferings"}, "Version": {"2016-11-15"},
		"InstanceType": {"p5.48xlarge"}, "InstanceCount": {"1"}, "CapacityDurationHours": {"24"}})
	if status != http.StatusOK {
		t.Fatalf("offerings: %d %s %s", status, code, msg)
	}
	offering := between(msg, "<capacityBlockOfferingId>", "</capacityBlockOfferingId>")
	status, code, msg = e.ec2Raw(t, memberKey, url.Values{"Action": {"PurchaseCapacityBlock"}, "Version": {"2016-11-15"},
		"CapacityBlockOfferingId": {offering}, "InstancePlatform": {"Linux/UNIX"}})
	if status != http.StatusOK {
		t.Fatalf("purchase of %q: %d %s %s", offering, status, code, msg)
	}
	return between(msg, "<capacityReservationId>", "</capacityReservationId>")
}

func between(s, from, to string) string {
	_, rest, _ := strings.Cut(s, from)
	v, _, _ := strings.Cut(rest, to)
	return v
}

// ec2Raw posts an EC2 Query call signed with key ("" for none), and
// returns the status, the error code and message, or, for a success,
// the body as msg.
func (e *env) ec2Raw(t *testing.T, key string, params url.Values) (status int, code, msg string) {
	t.Helper()
	body := params.Encode()
	resp := e.post(t, key, "ec2", body, map[string]string{"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, "", string(raw)
	}
	var out struct {
		Errors struct {
			Error []struct{ Code, Message string } `xml:"Error"`
		} `xml:"Errors"`
	}
	if err := xml.Unmarshal(raw, &out); err != nil || len(out.Errors.Error) == 0 {
		t.Fatalf("EC2 %s answered %d %s", params.Get("Action"), resp.StatusCode, raw)
	}
	return resp.StatusCode, out.Errors.Error[0].Code, out.Errors.Error[0].Message
}

// jsonRaw posts a JSON 1.1 call signed with key ("" for none).
func (e *env) jsonRaw(t *testing.T, key, target, body string) (status int, code, msg string) {
	t.Helper()
	resp := e.post(t, key, "sagemaker", body, map[string]string{"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": target})
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	code, _ = out["__type"].(string)
	msg, _ = out["message"].(string)
	return resp.StatusCode, code, msg
}

func (e *env) post(t *testing.T, key, service, body string, headers map[string]string) *http.Response {
	t.Helper()
	r, err := http.NewRequest(http.MethodPost, e.url+"/aws/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	if key != "" {
		sum := sha256.Sum256([]byte(body))
		creds := aws.Credentials{AccessKeyID: key, SecretAccessKey: secretOf(key)}
		if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, hex.EncodeToString(sum[:]), service, "us-east-1", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
