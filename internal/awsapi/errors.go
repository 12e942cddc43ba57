package awsapi

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"

	"capblock/internal/core"
)

// ec2Error is an answer in EC2's error shape: a code AWS's SDKs know, the
// HTTP status AWS uses for it, and a message.
type ec2Error struct {
	status int
	code   string
	msg    string
}

func (e *ec2Error) Error() string { return e.code + ": " + e.msg }

func ec2Errorf(status int, code, format string, args ...any) *ec2Error {
	return &ec2Error{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

func invalidParameter(format string, args ...any) *ec2Error {
	return ec2Errorf(http.StatusBadRequest, "InvalidParameterValue", format, args...)
}

func missingParameter(name string) *ec2Error {
	return ec2Errorf(http.StatusBadRequest, "MissingParameter", "the request must contain the parameter %s", name)
}

// reservationNotFound is EC2's answer for a reservation that does not
// exist or is another team's: the two read the same.
func reservationNotFound(id string) *ec2Error {
	return ec2Errorf(http.StatusBadRequest, "InvalidCapacityReservationId.NotFound", "the capacity reservation %s does not exist", id)
}

// serviceErrors maps the service's sentinel errors onto EC2's codes, the
// first match winning. Capacity that is not there is a client error
// (400), not AWS's 500: capblock's answer is final for the window asked,
// and a 5xx would have the SDKs retry it in vain.
var serviceErrors = []struct {
	err    error
	status int
	code   string
}{
	{core.ErrIdempotencyMismatch, http.StatusBadRequest, "IdempotentParameterMismatch"},
	{core.ErrOfferingUsed, http.StatusBadRequest, "InvalidParameterValue"},
	{core.ErrOfferingExpired, http.StatusBadRequest, "InvalidParameterValue"},
	{core.ErrOfferingInvalid, http.StatusBadRequest, "InvalidParameterValue"},
	{core.ErrNoCapacity, http.StatusBadRequest, "InsufficientInstanceCapacity"},
	{core.ErrInvalidState, http.StatusBadRequest, "IncorrectState"},
	{core.ErrQuotaExceeded, http.StatusBadRequest, "ReservationCapacityExceeded"},
	{core.ErrBudgetExceeded, http.StatusBadRequest, "BudgetExceeded"},
	{core.ErrUnauthenticated, http.StatusUnauthorized, "AuthFailure"},
	{core.ErrForbidden, http.StatusForbidden, "UnauthorizedOperation"},
	{core.ErrRateLimited, http.StatusServiceUnavailable, "RequestLimitExceeded"},
	{core.ErrConflict, http.StatusConflict, "IncorrectState"},
	{core.ErrInvalidArgument, http.StatusBadRequest, "InvalidParameterValue"},
}

// toEC2Error is err in EC2's terms; notFound answers core.ErrNotFound
// (the call's own "does not exist" code). Internal errors say nothing
// of their cause, which the log keeps.
func toEC2Error(err error, notFound func() *ec2Error) *ec2Error {
	var e *ec2Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, core.ErrNotFound) && notFound != nil {
		return notFound()
	}
	for _, m := range serviceErrors {
		if errors.Is(err, m.err) {
			return &ec2Error{status: m.status, code: m.code, msg: err.Error()}
		}
	}
	if errors.Is(err, core.ErrNotFound) {
		return &ec2Error{status: http.StatusBadRequest, code: "InvalidParameterValue", msg: err.Error()}
	}
	return nil
}

const internalMessage = "an internal error occurred; try again later"

// ec2Replier answers in EC2's shapes.
type ec2Replier struct {
	w         http.ResponseWriter
	requestID string
}

// ec2ErrorResponse is EC2's error document.
type ec2ErrorResponse struct {
	XMLName   xml.Name      `xml:"Response"`
	Errors    []ec2ErrorXML `xml:"Errors>Error"`
	RequestID string        `xml:"RequestID"`
}

type ec2ErrorXML struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

func (e ec2Replier) fail(status int, code, msg string) {
	e.write(status, ec2ErrorResponse{Errors: []ec2ErrorXML{{code, msg}}, RequestID: e.requestID})
}

func (e ec2Replier) auth(a *authError) {
	switch a.failure {
	case authMissing:
		e.fail(http.StatusUnauthorized, "MissingAuthenticationToken", a.msg)
	case authMalformed:
		e.fail(http.StatusBadRequest, "IncompleteSignature", a.msg)
	case authUnknownKey, authDisabled:
		e.fail(http.StatusUnauthorized, "AuthFailure", a.msg)
	case authExpired:
		e.fail(http.StatusBadRequest, "RequestExpired", a.msg)
	default:
		e.fail(http.StatusForbidden, "SignatureDoesNotMatch", a.msg)
	}
}

// ok answers body, a call's result, as the document <op>Response.
func (e ec2Replier) ok(op string, body any) {
	e.writeElement(http.StatusOK, body, xml.StartElement{
		Name: xml.Name{Local: op + "Response"},
		Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: ec2Namespace}},
	})
}

func (e ec2Replier) write(status int, v any) {
	e.writeElement(status, v, xml.StartElement{})
}

func (e ec2Replier) writeElement(status int, v any, start xml.StartElement) {
	e.w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	e.w.Header().Set("X-Amzn-RequestId", e.requestID)
	e.w.WriteHeader(status)
	_, _ = e.w.Write([]byte(xml.Header))
	enc := xml.NewEncoder(e.w)
	var err error
	if start.Name.Local == "" {
		err = enc.Encode(v)
	} else {
		err = enc.EncodeElement(v, start)
	}
	if err == nil {
		err = enc.Close()
	}
	_ = err // the status is written; a failed write has no one to tell
}

// jsonReplier answers in the JSON 1.1 protocol's error shape.
type jsonReplier struct {
	w         http.ResponseWriter
	requestID string
}

func (j jsonReplier) fail(status int, code, msg string) {
	j.w.Header().Set("X-Amzn-RequestId", j.requestID)
	WriteJSONError(j.w, status, code, msg)
}

// WriteJSONError answers a JSON 1.1 call with an error in the protocol's
// shape, {"__type": code, "message": message}, which the SDKs raise as
// the exception named code. The JSON services (SageMaker) answer their
// own errors with it; the response's X-Amzn-RequestId is already set.
func WriteJSONError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": message})
}

func (j jsonReplier) auth(a *authError) {
	switch a.failure {
	case authMissing:
		j.fail(http.StatusForbidden, "MissingAuthenticationTokenException", a.msg)
	case authMalformed:
		j.fail(http.StatusBadRequest, "IncompleteSignatureException", a.msg)
	case authUnknownKey, authDisabled:
		j.fail(http.StatusBadRequest, "UnrecognizedClientException", a.msg)
	case authExpired:
		j.fail(http.StatusBadRequest, "InvalidSignatureException", "Signature expired: "+a.msg)
	default:
		j.fail(http.StatusBadRequest, "InvalidSignatureException", a.msg)
	}
}
