// Package awsapi answers AWS's wire protocols, so that code written for
// AWS (the SDKs, the AWS CLI) works against capblock by changing only the
// endpoint and the keys: EC2's Query protocol for capacity blocks, and
// SageMaker's JSON 1.1 calls, which it hands to the SageMaker front end.
// Every request is verified with AWS Signature Version 4 against the
// service's access keys, then adapted onto contract.Service as the
// caller, which the service checks against contract's access table as it
// checks the REST API's calls.
package awsapi

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/httpx"
)

// Keys finds the secret and principal of an access key (contract.Service
// implements it). An unknown or revoked key is an error wrapping
// core.ErrUnauthenticated with no secret; a key whose user or team is
// disabled is such an error returned with the key's secret, and the
// error's message, which says why, is told to a client whose signature
// is good.
type Keys interface {
	AuthenticateAccessKey(ctx context.Context, accessKeyID string) (secret string, p core.Principal, err error)
}

// JSONService answers one JSON 1.1 call (X-Amz-Target "<Prefix>.<Op>")
// already authenticated as p. body is the request's whole body, also
// readable from r.Body; w already carries the X-Amzn-RequestId header.
// Errors are answered with WriteJSONError.
type JSONService interface {
	Serve(w http.ResponseWriter, r *http.Request, p core.Principal, op string, body []byte)
}

// Options configure the AWS endpoint.
type Options struct {
	// SageMaker answers the calls whose X-Amz-Target starts with
	// "SageMaker."; nil answers them UnknownOperationException.
	SageMaker JSONService
	// Now is the wall clock that signing times are checked against
	// (time.Now when nil); never a simulated clock, see verify.
	Now func() time.Time
	// Logger receives internal errors (discarded when nil).
	Logger *slog.Logger
	// MaxBodyBytes bounds a request's body (1 MiB when 0).
	MaxBodyBytes int64
	// Limiter bounds the requests of each user, and of each client
	// address for requests without a valid signature: the REST API's,
	// shared, so that a caller has one budget. When nil, one of RateLimit
	// requests a second with bursts of RateBurst is made (0: no limit).
	Limiter   *httpx.Limiter
	RateLimit float64
	RateBurst int
}

const defaultMaxBodyBytes = 1 << 20

// sageMakerTarget prefixes the X-Amz-Target of SageMaker's calls.
const sageMakerTarget = "SageMaker."

// New returns the handler of AWS's protocols over svc, with keys
// verifying signatures. It serves any path, so that it can be mounted at
// /aws and /aws/ (an SDK given the endpoint http://host/aws posts to
// /aws/); the path is signed as the client sent it.
func New(svc contract.Front, keys Keys, opts Options) http.Handler {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = defaultMaxBodyBytes
	}
	mustHaveAccessRules()
	if opts.Limiter == nil {
		opts.Limiter = httpx.NewLimiter(opts.RateLimit, max(opts.RateBurst, 1))
	}
	return &handler{svc: svc, keys: keys, opts: opts}
}

type handler struct {
	svc  contract.Front
	keys Keys
	opts Options
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	requestID := newRequestID()
	target := r.Header.Get("X-Amz-Target")
	var reply replier = ec2Replier{w: w, requestID: requestID}
	service := "ec2"
	if target != "" {
		reply = jsonReplier{w: w, requestID: requestID}
		service = "sagemaker"
	}
	if r.Method != http.MethodPost && (target != "" || r.Method != http.MethodGet) {
		reply.fail(http.StatusMethodNotAllowed, "InvalidAction", fmt.Sprintf("method %s is not supported; AWS's protocols POST", r.Method))
		return
	}
	// 1. Read the body, which the signature covers.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			reply.fail(http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", fmt.Sprintf("the body is over %d bytes", h.opts.MaxBodyBytes))
			return
		}
		reply.fail(http.StatusBadRequest, "MalformedRequest", "the body could not be read")
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	// 2. Who signed it?
	// Rates are counted per user, whichever key it signs with, and, for
	// requests without a good signature, per client address, as the REST
	// API counts them, in the same limiter.
	p, err := verify(r.Context(), h.keys, r, body, service, h.opts.Now())
	if err != nil {
		var ae *authError
		if errors.As(err, &ae) {
			addr := httpx.ClientAddr(r.RemoteAddr)
			if !h.allow(w, reply, target != "", httpx.AddrKey(addr), "from "+addr) {
				return
			}
			reply.auth(ae)
			return
		}
		h.opts.Logger.Error("aws: verifying a signature", "err", err, "requestId", requestID)
		reply.fail(http.StatusInternalServerError, "InternalError", "an internal error occurred; try again later")
		return
	}
	if !h.allow(w, reply, target != "", httpx.UserKey(p.User.ID), "by user "+p.User.Name+", whose keys and tokens share one limit") {
		return
	}
	// 3. Which protocol, which call?
	if target == "" {
		h.serveEC2(w, r, p, body, requestID)
		return
	}
	op, ok := strings.CutPrefix(target, sageMakerTarget)
	if !ok || h.opts.SageMaker == nil {
		reply.fail(http.StatusBadRequest, "UnknownOperationException", fmt.Sprintf("operation %s is not served here", target))
		return
	}
	w.Header().Set("X-Amzn-RequestId", requestID)
	m, audited := h.opts.SageMaker.(mutating)
	if !audited || !m.Mutating(op) {
		h.opts.SageMaker.Serve(w, r, p, op, body)
		return
	}
	// A call that changes something is recorded in the audit log, as the
	// REST API's and EC2's are, with the error type it answered.
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	h.opts.SageMaker.Serve(rec, r, p, op, body)
	outcome := contract.OutcomeOK
	if rec.status >= 300 {
		outcome = cmp.Or(rec.Header().Get("X-Amzn-ErrorType"), "error")
	}
	h.svc.RecordAudit(r.Context(), core.AuditRecord{
		User: p.User.ID, Team: p.User.Team, TokenID: p.TokenID,
		Method: r.Method, Route: "/aws " + target, Status: rec.status, Outcome: outcome,
	})
}

// mutating is what a JSONService may tell: which of its operations change
// something, and are audited.
type mutating interface {
	Mutating(op string) bool
}

// statusRecorder remembers the status a handler answered.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

// replier answers a request in its protocol's error shape.
type replier interface {
	fail(status int, code, msg string)
	auth(e *authError)
}

// newRequestID is a request id in AWS's form (a random UUID).
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
