package api

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"
)

// answer is one problem an operation can answer: its status and code.
type answer struct {
	Status int
	Code   string
}

func (a answer) String() string { return strconv.Itoa(a.Status) + " " + a.Code }

// The problems of API.md, by status and code.
var (
	badRequest          = answer{http.StatusBadRequest, CodeInvalidArgument}
	tooLarge            = answer{http.StatusRequestEntityTooLarge, CodeInvalidArgument}
	unsupportedMedia    = answer{http.StatusUnsupportedMediaType, CodeInvalidArgument}
	unauthenticated     = answer{http.StatusUnauthorized, CodeUnauthenticated}
	forbidden           = answer{http.StatusForbidden, CodeForbidden}
	notFound            = answer{http.StatusNotFound, CodeNotFound}
	conflict            = answer{http.StatusConflict, CodeConflict}
	noCapacity          = answer{http.StatusConflict, CodeNoCapacity}
	offeringExpired     = answer{http.StatusGone, CodeOfferingExpired}
	offeringInvalid     = answer{http.StatusBadRequest, CodeOfferingInvalid}
	idempotencyMismatch = answer{http.StatusConflict, CodeIdempotencyMismatch}
	quotaExceeded       = answer{http.StatusForbidden, CodeQuotaExceeded}
	budgetExceeded      = answer{http.StatusPaymentRequired, CodeBudgetExceeded}
	invalidState        = answer{http.StatusConflict, CodeInvalidState}
	offeringUsed        = answer{http.StatusConflict, CodeOfferingUsed}
	rateLimited         = answer{http.StatusTooManyRequests, CodeRateLimited}
	internalError       = answer{http.StatusInternalServerError, CodeInternal}
	notReady            = answer{http.StatusServiceUnavailable, CodeInternal}
)

// codeMeanings say, in the document, when each code is answered.
var codeMeanings = map[string]string{
	CodeInvalidArgument:     "the request is malformed: a parameter or body field is missing, unknown or out of range (the detail names it)",
	CodeUnauthenticated:     "no valid API token (missing, unknown, expired or revoked, or its user or team is disabled)",
	CodeForbidden:           "the caller's role or scope does not allow this operation",
	CodeNotFound:            "the subject does not exist, or belongs to another team",
	CodeConflict:            "a concurrent change or a duplicate (a name in use, too many credentials); retry or rename",
	CodeNoCapacity:          "not enough free capacity for what was asked",
	CodeOfferingExpired:     "the offering's quote has expired: search again",
	CodeOfferingInvalid:     "the offering id is not one this service issued for this operation",
	CodeIdempotencyMismatch: "the client token was used before with other parameters",
	CodeQuotaExceeded:       "the team's quota does not allow it",
	CodeBudgetExceeded:      "the team's budget does not allow it",
	CodeInvalidState:        "the subject's state does not allow this operation",
	CodeOfferingUsed:        "the quote already bought a block, plan or series (the same client token replays that purchase)",
	CodeRateLimited:         "too many requests: wait for Retry-After seconds",
	CodeInternal:            "an unexpected failure, logged on the server",
}

// mutation is what an operation that commits a change of an existing
// subject can answer beyond its kind's problems: its state may not allow
// the change, and a concurrent change may win the commit.
var mutation = []answer{invalidState, conflict}

// purchase is what buying a quote can answer: the quote itself, the
// client token, the capacity, the team's quota and budget, the team's
// state, a concurrent commit.
var purchase = []answer{offeringInvalid, offeringExpired, offeringUsed, idempotencyMismatch,
	noCapacity, quotaExceeded, budgetExceeded, invalidState, conflict, notFound}

// operationProblems are the problems each operation answers beyond those
// every operation of its kind answers (kindProblems): what its use case's
// service call can refuse. It is the one table of them: the document
// declares from it, and the tests fail on an answer it lacks. New panics
// on a registered operation that it does not list.
var operationProblems = map[string][]answer{
	"healthz": nil,
	"readyz":  {notReady},

	"listInstanceTypes": nil,
	"listNodes":         nil,
	"getAvailability":   nil,
	"getPolicy":         nil,
	"getFleetCalendar":  nil,

	"searchOfferings":  nil,
	"getPriceCalendar": nil,
	"purchaseBlock":    purchase,
	"listBlocks":       nil,
	"getBlock":         nil,
	"cancelBlock":      mutation,
	"approveBlock":     mutation,
	// An extension is quoted only for a block that can still grow, and
	// none when the capacity is taken (an empty list).
	"listExtensionOfferings": {invalidState},
	"extendBlock":            {offeringInvalid, offeringExpired, offeringUsed, noCapacity, quotaExceeded, budgetExceeded, invalidState, conflict},
	"getBlockStatus":         nil,
	"getCancelQuote":         {invalidState},
	"transferBlock":          {invalidState, conflict, quotaExceeded, budgetExceeded},
	"releaseBlock":           mutation,
	"setBlockLending":        mutation,

	"searchPlanOfferings": nil,
	"purchasePlan":        purchase,
	"listPlans":           nil,
	"getPlan":             nil,
	"cancelPlan":          mutation,

	"searchSeriesOfferings": {notFound},
	"purchaseSeries":        purchase,
	"listSeries":            nil,
	"getSeries":             nil,
	"cancelSeries":          mutation,

	"createOrder": {quotaExceeded, budgetExceeded, invalidState, idempotencyMismatch, conflict, notFound},
	"listOrders":  nil,
	"getOrder":    nil,
	"cancelOrder": mutation,

	"listEvents":            nil,
	"createWebhook":         {notFound, conflict},
	"listWebhooks":          nil,
	"deleteWebhook":         {conflict},
	"listWebhookDeliveries": nil,

	"getClock": nil,
	"setClock": {conflict},

	"createJob":  {notFound, invalidState, conflict},
	"listJobs":   nil,
	"getJob":     nil,
	"getJobLogs": nil,
	"stopJob":    mutation,

	"failNode":    {conflict},
	"recoverNode": {conflict},

	"createTeam":  {conflict},
	"listTeams":   nil,
	"getTeam":     nil,
	"putQuotas":   {conflict},
	"getQuotas":   nil,
	"putBudget":   {conflict},
	"getLedger":   nil,
	"getSpend":    nil,
	"createUser":  {notFound, conflict},
	"disableUser": mutation,
	"enableUser":  mutation,
	"disableTeam": mutation,
	"enableTeam":  mutation,
	"listUsers":   nil,
	"whoami":      nil,

	"createToken":     {invalidState, conflict},
	"listTokens":      nil,
	"revokeToken":     {conflict},
	"createAccessKey": {invalidState, conflict},
	"listAccessKeys":  nil,
	"revokeAccessKey": {conflict},

	"listAudit":      nil,
	"getUtilisation": nil,
}

// kindProblems are the problems that every operation like op answers,
// whatever it calls: an unexpected failure; without a valid token, with a
// role too low, or too often (every operation but a public one); a bad
// parameter or body (every operation that takes one); a body too large
// or not JSON (every operation that reads one); an unknown subject (every
// operation on a path's subject, and every one that may name a team).
func kindProblems(op *huma.Operation) []answer {
	out := []answer{internalError}
	if useCases[op.OperationID] != public {
		out = append(out, unauthenticated, forbidden, rateLimited)
	}
	if len(op.Parameters) > 0 || op.RequestBody != nil {
		out = append(out, badRequest)
	}
	if op.RequestBody != nil {
		out = append(out, tooLarge, unsupportedMedia)
	}
	for _, p := range op.Parameters {
		if p.In == "path" || p.Name == "team" {
			out = append(out, notFound)
			break
		}
	}
	return out
}

// problemsOf is every problem op can answer, by status then code.
func problemsOf(op *huma.Operation) []answer {
	all := append(kindProblems(op), operationProblems[op.OperationID]...)
	slices.SortFunc(all, func(a, b answer) int {
		if a.Status != b.Status {
			return a.Status - b.Status
		}
		return strings.Compare(a.Code, b.Code)
	})
	return slices.Compact(all)
}

// operationsOf lists the operations of a huma API.
func operationsOf(api huma.API) []*huma.Operation {
	var ops []*huma.Operation
	for _, item := range api.OpenAPI().Paths {
		for _, op := range []*huma.Operation{item.Get, item.Put, item.Post, item.Delete, item.Patch, item.Head, item.Options} {
			if op != nil {
				ops = append(ops, op)
			}
		}
	}
	return ops
}

// declareProblems replaces each operation's catch-all error response in
// the document with one response per status it can answer (problemsOf),
// whose problem schema allows only the codes it can answer there. It
// panics on an operation that operationProblems does not list, so that a
// new route cannot be left undeclared.
func declareProblems(api huma.API) {
	for _, op := range operationsOf(api) {
		if _, ok := operationProblems[op.OperationID]; !ok {
			panic(fmt.Sprintf("api: operation %s (%s %s) has no entry in operationProblems", op.OperationID, op.Method, op.Path))
		}
		delete(op.Responses, "default")
		byStatus := map[int][]string{}
		var statuses []int
		for _, a := range problemsOf(op) {
			if _, ok := byStatus[a.Status]; !ok {
				statuses = append(statuses, a.Status)
			}
			byStatus[a.Status] = append(byStatus[a.Status], a.Code)
		}
		var codes []string
		for _, status := range statuses {
			op.Responses[strconv.Itoa(status)] = problemResponse(status, byStatus[status])
			codes = append(codes, byStatus[status]...)
		}
		slices.Sort(codes)
		op.Extensions = withExtension(op.Extensions, "x-problem-codes", slices.Compact(codes))
	}
}

// problemResponse is the response of status, a problem with one of codes.
func problemResponse(status int, codes []string) *huma.Response {
	var lines []string
	for _, c := range codes {
		meaning := codeMeanings[c]
		switch {
		case c == CodeInvalidArgument && status == http.StatusRequestEntityTooLarge:
			meaning = "the request body is over the server's limit"
		case c == CodeInvalidArgument && status == http.StatusUnsupportedMediaType:
			meaning = "the request body is not application/json"
		case c == CodeInternal && status == http.StatusServiceUnavailable:
			meaning = "the server is not ready (its database or engine is not reachable); the cause is logged"
		}
		lines = append(lines, "`"+c+"`: "+meaning+".")
	}
	enum := make([]any, len(codes))
	for i, c := range codes {
		enum[i] = c
	}
	return &huma.Response{
		Description: http.StatusText(status) + ". A problem with one of these codes:\n\n- " + strings.Join(lines, "\n- "),
		Content: map[string]*huma.MediaType{
			problemJSON: {Schema: &huma.Schema{
				AllOf: []*huma.Schema{{Ref: "#/components/schemas/Problem"}},
				Properties: map[string]*huma.Schema{
					"status": {Type: huma.TypeInteger, Enum: []any{status}},
					"code":   {Type: huma.TypeString, Enum: enum},
				},
			}},
		},
	}
}

func withExtension(ext map[string]any, key string, value any) map[string]any {
	if ext == nil {
		ext = map[string]any{}
	}
	ext[key] = value
	return ext
}
