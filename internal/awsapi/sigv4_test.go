package awsapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"capblock/internal/core"
)

// secrets is a table of access keys and their secrets.
type secrets map[string]string

func (s secrets) AuthenticateAccessKey(_ context.Context, id string) (string, core.Principal, error) {
	secret, ok := s[id]
	if !ok {
		return "", core.Principal{}, fmt.Errorf("access key %s: %w", id, core.ErrUnauthenticated)
	}
	return secret, core.Principal{User: core.User{ID: "u-" + id}}, nil
}

// failure is the authFailure of err, or 0.
func failure(err error) authFailure {
	var ae *authError
	if errors.As(err, &ae) {
		return ae.failure
	}
	return 0
}

// TestVerifyAWSTestSuite checks requests of AWS's published SigV4 test
// suite (get-vanilla, get-vanilla-query-order-key-case) and the same
// requests altered.
func TestVerifyAWSTestSuite(t *testing.T) {
	keys := secrets{"AKIDEXAMPLE": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
	signedAt := time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)
	const scope = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature="
	tests := map[string]struct {
		method, target, signature string
		want                      authFailure
	}{
		"get-vanilla":                      {"GET", "https://example.amazonaws.com/", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31", 0},
		"get-vanilla-query-order-key-case": {"GET", "https://example.amazonaws.com/?Param2=value2&Param1=value1", "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500", 0},
		"get-vanilla as a POST":            {"POST", "https://example.amazonaws.com/", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31", authBadSignature},
		"get-vanilla on another path":      {"GET", "https://example.amazonaws.com/x", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31", authBadSignature},
		"a query added":                    {"GET", "https://example.amazonaws.com/?Param2=value2&Param1=value1&Param3=x", "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500", authBadSignature},
		"one digit changed":                {"GET", "https://example.amazonaws.com/", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf32", authBadSignature},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.target, nil)
			r.Header.Set("X-Amz-Date", "20150830T123600Z")
			r.Header.Set("Authorization", scope+tc.signature)
			_, err := verify(context.Background(), keys, r, nil, "service", signedAt.Add(time.Minute))
			if got := failure(err); got != tc.want || (tc.want == 0 && err != nil) {
				t.Errorf("verify: %v (failure %d), want failure %d", err, got, tc.want)
			}
		})
	}
}

// TestVerifySDKSigner sends requests signed by the SDK's own signer to a
// server that verifies them: odd paths, queries that sort by key before
// value, bodies, padded header values; then the same altered.
func TestVerifySDKSigner(t *testing.T) {
	keys := secrets{"AKIATEST": "s3cr3t/+key"}
	var now time.Time
	results := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, err := verify(r.Context(), keys, r, body, "ec2", now)
		results <- err
	}))
	defer srv.Close()
	send := func(t *testing.T, method, target, body string, signedAt time.Time, creds aws.Credentials, service string, tamper func(*http.Request)) error {
		t.Helper()
		r, err := http.NewRequest(method, srv.URL+target, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
		r.Header.Set("X-Amz-Meta", "  padded   value ")
		sum := sha256.Sum256([]byte(body))
		// A signer of its own: a signer caches derived keys by key id, not
		// by secret.
		if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, hex.EncodeToString(sum[:]), service, "eu-west-3", signedAt); err != nil {
			t.Fatal(err)
		}
		if tamper != nil {
			tamper(r)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return <-results
	}
	creds := aws.Credentials{AccessKeyID: "AKIATEST", SecretAccessKey: "s3cr3t/+key"}
	now = time.Now().UTC()
	for _, target := range []string{"/aws", "/aws/", "/aws/a%20b/c~d", "/aws/x?b=2&a=1&a-b=3&sp=a%20b&plus=a%2Bb&a=0", "/?Action=DescribeCapacityBlocks&Version=2016-11-15"} {
		for _, body := range []string{"", "Action=DescribeCapacityBlocks&Version=2016-11-15"} {
			if err := send(t, http.MethodPost, target, body, now, creds, "ec2", nil); err != nil {
				t.Errorf("POST %s with %q: %v", target, body, err)
			}
		}
	}
	refused := map[string]struct {
		signedAt time.Time
		creds    aws.Credentials
		service  string
		tamper   func(*http.Request)
		want     authFailure
	}{
		"the body changed": {now, creds, "ec2", func(r *http.Request) {
			r.Body = io.NopCloser(strings.NewReader("Action=CancelCapacityReservation"))
			r.ContentLength = int64(len("Action=CancelCapacityReservation"))
		}, authBadSignature},
		"a signed header changed": {now, creds, "ec2", func(r *http.Request) { r.Header.Set("X-Amz-Meta", "other") }, authBadSignature},
		"the wrong secret":        {now, aws.Credentials{AccessKeyID: "AKIATEST", SecretAccessKey: "guess"}, "ec2", nil, authBadSignature},
		"an unknown key":          {now, aws.Credentials{AccessKeyID: "AKIAOTHER", SecretAccessKey: "s3cr3t/+key"}, "ec2", nil, authUnknownKey},
		"another service":         {now, creds, "s3", nil, authWrongService},
		"signed 6 minutes ago":    {now.Add(-6 * time.Minute), creds, "ec2", nil, authExpired},
		"signed 6 minutes ahead":  {now.Add(6 * time.Minute), creds, "ec2", nil, authExpired},
		"no signature":            {now, creds, "ec2", func(r *http.Request) { r.Header.Del("Authorization") }, authMissing},
		"not SigV4":               {now, creds, "ec2", func(r *http.Request) { r.Header.Set("Authorization", "Bearer cbt_x") }, authMalformed},
		"a payload hash that is not the body's": {now, creds, "ec2", func(r *http.Request) {
			r.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
		}, authBadSignature},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			err := send(t, http.MethodPost, "/aws", "Action=DescribeCapacityBlocks&Version=2016-11-15", tc.signedAt, tc.creds, tc.service, tc.tamper)
			if got := failure(err); got != tc.want {
				t.Errorf("verify: %v (failure %d), want failure %d", err, got, tc.want)
			}
		})
	}
	// Four minutes either way is within the skew allowed.
	for _, d := range []time.Duration{-4 * time.Minute, 4 * time.Minute} {
		if err := send(t, http.MethodPost, "/aws", "", now.Add(d), creds, "ec2", nil); err != nil {
			t.Errorf("signed %s from the server's clock: %v", d, err)
		}
	}
}

func TestParseAuthorization(t *testing.T) {
	for _, h := range []string{
		"AWS4-HMAC-SHA256",
		"AWS4-HMAC-SHA1 Credential=A/20150830/us-east-1/ec2/aws4_request, SignedHeaders=host;x-amz-date, Signature=ab",
		"AWS4-HMAC-SHA256 Credential=A/20150830/us-east-1/ec2, SignedHeaders=host;x-amz-date, Signature=ab",
		"AWS4-HMAC-SHA256 Credential=A/20150830/us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=ab",
		"AWS4-HMAC-SHA256 Credential=A/20150830/us-east-1/ec2/aws4_request, SignedHeaders=host;x-amz-date",
		"AWS4-HMAC-SHA256 Credential=//us-east-1/ec2/aws4_request, SignedHeaders=host;x-amz-date, Signature=ab",
		"AWS4-HMAC-SHA256 Credential, SignedHeaders=host;x-amz-date, Signature=ab",
	} {
		if _, err := parseAuthorization(h); err == nil {
			t.Errorf("%q parsed", h)
		}
	}
	c, err := parseAuthorization("AWS4-HMAC-SHA256 Credential=AKID/20150830/eu-west-3/sagemaker/aws4_request,SignedHeaders=content-type;host;x-amz-date,Signature=abcd")
	if err != nil || c != (credential{"AKID", "20150830", "eu-west-3", "sagemaker", "content-type;host;x-amz-date", "abcd"}) {
		t.Errorf("parsed %+v, %v", c, err)
	}
}
