package awsapi

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"capblock/internal/core"
)

// The parts of AWS Signature Version 4 that capblock verifies: requests
// signed in the Authorization header, the way AWS's SDKs and CLI sign
// them (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html).
// Presigned URLs (the signature in the query) are not accepted: such a
// request has no Authorization header and is answered as unsigned.
const (
	sigAlgorithm = "AWS4-HMAC-SHA256"
	amzDateForm  = "20060102T150405Z"
	scopeDate    = "20060102"
	scopeEnd     = "aws4_request"
	// maxSkew is how far a request's signing time may be from the
	// server's wall clock, either way, as AWS allows.
	maxSkew = 5 * time.Minute
)

// authFailure is why a request's signature was refused; each protocol
// says it with its own code (ec2Auth, jsonAuth).
type authFailure int

const (
	authMissing        authFailure = iota + 1 // no Authorization header
	authMalformed                             // an Authorization header that is not SigV4's
	authUnknownKey                            // an access key that is unknown or revoked
	authBadSignature                          // a signature that does not match
	authWrongService                          // a credential scoped to another service
	authExpired                               // signed too long ago, or in the future
	authUnsignedHeader                        // a header the signature must cover and does not
	authDisabled                              // a good signature by a disabled user's (or team's) key
)

// authError is a refused signature with what to tell the client.
type authError struct {
	failure authFailure
	msg     string
}

func (e *authError) Error() string { return e.msg }

// credential is what a SigV4 Authorization header says.
type credential struct {
	accessKeyID   string
	date          string // yyyymmdd
	region        string
	service       string
	signedHeaders string // as sent: lower-case names joined by ';'
	signature     string // hex
}

// parseAuthorization reads "AWS4-HMAC-SHA256 Credential=AKID/date/region/
// service/aws4_request, SignedHeaders=a;b, Signature=hex".
func parseAuthorization(h string) (credential, error) {
	alg, rest, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || alg != sigAlgorithm {
		return credential{}, fmt.Errorf("the Authorization header must start with %s", sigAlgorithm)
	}
	fields := map[string]string{}
	for part := range strings.SplitSeq(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return credential{}, fmt.Errorf("the Authorization header has a part %q without '='", strings.TrimSpace(part))
		}
		fields[k] = v
	}
	for _, k := range []string{"Credential", "SignedHeaders", "Signature"} {
		if fields[k] == "" {
			return credential{}, fmt.Errorf("the Authorization header lacks %s", k)
		}
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 || scope[4] != scopeEnd || slices.Contains(scope, "") {
		return credential{}, errors.New("the Credential must read <access key>/<yyyymmdd>/<region>/<service>/aws4_request")
	}
	c := credential{
		accessKeyID: scope[0], date: scope[1], region: scope[2], service: scope[3],
		signedHeaders: fields["SignedHeaders"], signature: fields["Signature"],
	}
	signed := strings.Split(c.signedHeaders, ";")
	if !slices.Contains(signed, "host") || !slices.Contains(signed, "x-amz-date") {
		return credential{}, errors.New("SignedHeaders must include host and x-amz-date")
	}
	return c, nil
}

// verify checks the SigV4 signature of r, whose body is body, and
// returns the principal of its access key. service is the one the
// credential must be scoped to (ec2, sagemaker); now is the wall clock.
//
// The signing time is checked against the wall clock, never the
// service's (possibly simulated) clock: a client signs with its own wall
// clock, and the skew allowed is there to stop replays, which only real
// time measures. The signature is checked first, so that only a holder
// of the key learns that its request was too old.
func verify(ctx context.Context, keys Keys, r *http.Request, body []byte, service string, now time.Time) (core.Principal, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return core.Principal{}, &authError{authMissing, "the request is not signed: sign it with AWS Signature Version 4 (an AWS SDK or the AWS CLI does, given an access key)"}
	}
	c, err := parseAuthorization(h)
	if err != nil {
		return core.Principal{}, &authError{authMalformed, err.Error()}
	}
	amzDate := r.Header.Get("X-Amz-Date")
	signedAt, err := time.Parse(amzDateForm, amzDate)
	if err != nil {
		return core.Principal{}, &authError{authMalformed, fmt.Sprintf("X-Amz-Date %q is not a time like 20060102T150405Z", amzDate)}
	}
	if signedAt.Format(scopeDate) != c.date {
		return core.Principal{}, &authError{authMalformed, fmt.Sprintf("the Credential's date %s is not the day of X-Amz-Date %s", c.date, amzDate)}
	}
	if c.service != service {
		return core.Principal{}, &authError{authWrongService, fmt.Sprintf("the Credential is scoped to service %q; this request must be signed for %q", c.service, service)}
	}
	if unsigned := unsignedHeaders(r, c.signedHeaders); len(unsigned) > 0 {
		return core.Principal{}, &authError{authUnsignedHeader, fmt.Sprintf("the signature does not cover the header(s) %s; sign host, content-type and every x-amz-* header sent (the AWS SDKs do)",
			strings.Join(unsigned, ", "))}
	}
	secret, p, err := keys.AuthenticateAccessKey(ctx, c.accessKeyID)
	// A disabled user's or team's key comes with its secret, so that only
	// a holder of the key learns why it is refused.
	var disabled error
	switch {
	case err == nil:
	case errors.Is(err, core.ErrUnauthenticated) && secret != "":
		disabled = err
	case errors.Is(err, core.ErrUnauthenticated):
		return core.Principal{}, &authError{authUnknownKey, fmt.Sprintf("access key %s is unknown or revoked", c.accessKeyID)}
	default:
		return core.Principal{}, fmt.Errorf("looking up access key %s: %w", c.accessKeyID, err)
	}
	payload := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(payload[:])
	if sent := r.Header.Get("X-Amz-Content-Sha256"); sent != "" && sent != payloadHash {
		return core.Principal{}, &authError{authBadSignature, "X-Amz-Content-Sha256 is not the SHA-256 of the body; the body must be signed"}
	}
	want := signature(secret, c, amzDate, canonicalRequest(r, c.signedHeaders, payloadHash))
	if !hmac.Equal([]byte(want), []byte(strings.ToLower(c.signature))) {
		return core.Principal{}, &authError{authBadSignature, "the request signature does not match the one computed with the access key's secret; check the secret key and the signing method"}
	}
	if d := now.Sub(signedAt); d > maxSkew || d < -maxSkew {
		return core.Principal{}, &authError{authExpired, fmt.Sprintf("the request was signed at %s, more than %s from the server's time %s; check the client's clock",
			signedAt.Format(time.RFC3339), maxSkew, now.UTC().Format(time.RFC3339))}
	}
	if disabled != nil {
		return core.Principal{}, &authError{authDisabled, disabled.Error()}
	}
	return p, nil
}

// unsignedHeaders names, sorted, the headers of r that a signature must
// cover and signedHeaders leaves out: content-type and every x-amz-*
// header sent (host and x-amz-date are checked by parseAuthorization).
// The body and the path are signed, but a JSON call's operation is its
// X-Amz-Target header: left unsigned, a captured DescribeTrainingJob
// could be sent again as StopTrainingJob. Headers the SDKs leave unsigned
// (User-Agent, X-Amzn-Trace-Id, Expect, Transfer-Encoding) are not
// required; nor is Content-Length, whose value the body's hash fixes.
func unsignedHeaders(r *http.Request, signedHeaders string) []string {
	signed := strings.Split(signedHeaders, ";")
	var unsigned []string
	for name := range r.Header {
		name = strings.ToLower(name)
		if (name == "content-type" || strings.HasPrefix(name, "x-amz-")) && !slices.Contains(signed, name) {
			unsigned = append(unsigned, name)
		}
	}
	sort.Strings(unsigned)
	return unsigned
}

// signature is the hex HMAC of the string to sign, with the key derived
// from secret for the credential's day, region and service.
func signature(secret string, c credential, amzDate, canonical string) string {
	key := hmacSHA256([]byte("AWS4"+secret), c.date)
	key = hmacSHA256(key, c.region)
	key = hmacSHA256(key, c.service)
	key = hmacSHA256(key, scopeEnd)
	sum := sha256.Sum256([]byte(canonical))
	toSign := strings.Join([]string{
		sigAlgorithm, amzDate,
		strings.Join([]string{c.date, c.region, c.service, scopeEnd}, "/"),
		hex.EncodeToString(sum[:]),
	}, "\n")
	return hex.EncodeToString(hmacSHA256(key, toSign))
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// canonicalRequest is SigV4's canonical form of r: method, path, query,
// the signed headers and the payload's hash.
func canonicalRequest(r *http.Request, signedHeaders, payloadHash string) string {
	path, rawQuery := requestTarget(r)
	var headers strings.Builder
	for name := range strings.SplitSeq(signedHeaders, ";") {
		headers.WriteString(name)
		headers.WriteByte(':')
		headers.WriteString(headerValue(r, name))
		headers.WriteByte('\n')
	}
	return strings.Join([]string{
		r.Method,
		// Every service but S3 signs its path escaped once more, as the
		// SDKs do.
		escape(path, false),
		canonicalQuery(rawQuery),
		headers.String(),
		signedHeaders,
		payloadHash,
	}, "\n")
}

// requestTarget is the path and query of r as the client sent them:
// from the request line, which a mount's prefix stripping leaves alone.
func requestTarget(r *http.Request) (path, rawQuery string) {
	target := r.RequestURI
	if target == "" { // a request made in-process, not read from a connection
		return orRoot(r.URL.EscapedPath()), r.URL.RawQuery
	}
	if u, err := url.ParseRequestURI(target); err == nil && u.IsAbs() {
		target = u.RequestURI()
	}
	path, rawQuery, _ = strings.Cut(target, "?")
	return orRoot(path), rawQuery
}

// orRoot is path, or "/" when it is empty.
func orRoot(path string) string {
	if path == "" {
		return "/"
	}
	return path
}

// headerValue is a signed header's canonical value: its values trimmed,
// inner runs of spaces made one (as the SDKs do; tabs stay), joined by
// commas.
func headerValue(r *http.Request, name string) string {
	var values []string
	switch name {
	case "host":
		values = []string{r.Host}
	case "content-length":
		values = r.Header.Values("Content-Length")
		if len(values) == 0 && r.ContentLength >= 0 {
			values = []string{strconv.FormatInt(r.ContentLength, 10)}
		}
	default:
		values = r.Header.Values(name)
	}
	for i, v := range values {
		values[i] = collapseSpaces(strings.TrimSpace(v))
	}
	return strings.Join(values, ",")
}

// collapseSpaces makes each run of spaces in s one space.
func collapseSpaces(s string) string {
	if !strings.Contains(s, "  ") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' && i > 0 && s[i-1] == ' ' {
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// canonicalQuery is the query's parameters escaped as SigV4 wants,
// sorted by name, then value.
func canonicalQuery(rawQuery string) string {
	if rawQuery == "" {
		return ""
	}
	values, _ := url.ParseQuery(rawQuery)
	type param struct{ k, v string }
	params := make([]param, 0, len(values))
	for k, vs := range values {
		for _, v := range vs {
			params = append(params, param{escape(k, true), escape(v, true)})
		}
	}
	sort.Slice(params, func(i, j int) bool {
		if params[i].k != params[j].k {
			return params[i].k < params[j].k
		}
		return params[i].v < params[j].v
	})
	pairs := make([]string, len(params))
	for i, p := range params {
		pairs[i] = p.k + "=" + p.v
	}
	return strings.Join(pairs, "&")
}

// escape percent-encodes every byte but RFC 3986's unreserved characters
// (and '/', unless encodeSlash).
func escape(s string, encodeSlash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '/' && !encodeSlash {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}
