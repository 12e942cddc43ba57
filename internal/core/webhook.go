package core

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Webhook is a team's subscription to its events: capblock POSTs each
// event of the team whose type matches one of Events to URL, signed with
// Secret.
type Webhook struct {
	ID   string
	Team string
	URL  string
	// Events are patterns: an exact type ("block.active"), a prefix
	// wildcard ("block.*") or "*" for every type.
	Events []string
	// Secret is the HMAC key of the signatures, as shown to its owner
	// once, and never logged. Signing needs the secret itself, so it
	// cannot be hashed: it is stored as Sealed, bound to the webhook's id,
	// and Secret is empty in what the store returns. A webhook stored by
	// an older version, or by a server without a secrets key, has its
	// Secret in clear and no Sealed secret until a server with a key
	// seals it (Service.sealWebhookSecrets).
	Secret    string
	Sealed    SealedSecret
	CreatedAt time.Time
}

// Matches reports whether an event of type eventType goes to the webhook.
func (w Webhook) Matches(eventType string) bool {
	for _, p := range w.Events {
		if MatchesEventPattern(p, eventType) {
			return true
		}
	}
	return false
}

// MatchesEventPattern reports whether eventType matches one pattern: "*"
// matches every type, "block.*" every type that starts with "block.", and
// anything else only itself.
func MatchesEventPattern(pattern, eventType string) bool {
	if pattern == "*" {
		return true
	}
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(eventType, prefix) && len(eventType) > len(prefix)
	}
	return pattern == eventType
}

// eventPattern is an exact type of dot-separated lower-case words, that
// type's prefix followed by ".*", or "*".
var eventPattern = regexp.MustCompile(`^(\*|[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)*(\.\*)?)$`)

// CheckEventPattern returns an ErrInvalidArgument unless p is a pattern
// that Matches understands.
func CheckEventPattern(p string) error {
	if len(p) > 100 || !eventPattern.MatchString(p) {
		return Invalidf("event pattern %q: use an event type such as block.active, a prefix such as block.*, or *", p)
	}
	return nil
}

// Delivery is one line of a webhook's delivery log: an event scheduled for
// the webhook (Attempt 0) or one attempt to POST it (Attempt 1, 2, …).
type Delivery struct {
	ID       string
	Webhook  string
	EventID  string
	EventSeq int64
	Attempt  int
	// Time is when the delivery was scheduled or the attempt made.
	Time time.Time
	// Status is the receiver's HTTP status, 0 when none came back.
	Status int
	// Error says why the attempt failed: no answer, or a status not 2xx.
	Error string
	// NextAt is when the next attempt is due; zero when Done.
	NextAt time.Time
	// Done is set on the last line of a delivery: delivered, or given up.
	Done bool
}

// SignatureHeader is the header that carries a delivery's signature.
const SignatureHeader = "Capblock-Signature"

// SignPayload returns the Capblock-Signature header value of a delivery
// of body made at t: "t=<unix seconds>,v1=<hex HMAC-SHA256 of
// "<t>.<body>" keyed with secret>". Signing the time too lets a receiver
// refuse a replay of an old delivery.
func SignPayload(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(signature(secret, ts, body))
}

func signature(secret []byte, ts string, body []byte) []byte {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts))
	mac.Write([]byte("."))
	mac.Write(body)
	return mac.Sum(nil)
}

// ErrBadSignature is returned by VerifySignature for a header that does
// not sign the body with the secret, or signs it too long ago.
var ErrBadSignature = errors.New("bad webhook signature")

// VerifySignature checks a Capblock-Signature header, as a receiver
// should: one of its v1 values must be the body's signature with secret,
// and its time within tolerance of now (a tolerance of 0 skips the time
// check).
func VerifySignature(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var (
		ts     string
		hashes [][]byte
	)
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if h, err := hex.DecodeString(v); err == nil {
				hashes = append(hashes, h)
			}
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(hashes) == 0 {
		return fmt.Errorf("%w: want t=<unix>,v1=<hex>", ErrBadSignature)
	}
	if tolerance > 0 {
		if age := now.Sub(time.Unix(unix, 0)); age > tolerance || age < -tolerance {
			return fmt.Errorf("%w: signed at %s, more than %s from %s", ErrBadSignature,
				time.Unix(unix, 0).UTC().Format(time.RFC3339), tolerance, now.UTC().Format(time.RFC3339))
		}
	}
	want := signature(secret, ts, body)
	for _, h := range hashes {
		if hmac.Equal(h, want) {
			return nil
		}
	}
	return fmt.Errorf("%w: no v1 value matches the body", ErrBadSignature)
}

// RetryDelay is how long to wait after failed attempt n (1, 2, …) before
// the next: first, doubled for each attempt since, at most limit.
func RetryDelay(n int, first, limit time.Duration) time.Duration {
	d := first
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}
