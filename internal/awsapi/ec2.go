package awsapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// EC2's Query protocol: a form of parameters naming an Action and the
// API Version, answered with XML in EC2's namespace.
const (
	ec2Version   = "2016-11-15"
	ec2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"
)

// ec2Op is one EC2 action capblock answers.
type ec2Op struct {
	// uc is the use case the action calls, whose rule in contract's
	// access table decides who may.
	uc contract.UseCase
	// params are the parameters it takes besides Action, Version and
	// DryRun, by their first part ("Filter" for Filter.1.Name).
	params []string
	// mutating actions are recorded in the audit log.
	mutating bool
	run      func(c *ec2Call) (any, error)
}

var ec2Ops = map[string]ec2Op{
	"DescribeCapacityBlockOfferings": {uc: "Offerings", run: (*ec2Call).describeCapacityBlockOfferings,
		params: []string{"InstanceType", "InstanceCount", "StartDateRange", "EndDateRange", "CapacityDurationHours", "MaxResults", "NextToken", "AllAvailabilityZones", "UltraserverType", "UltraserverCount"}},
	"PurchaseCapacityBlock": {uc: "Purchase", mutating: true, run: (*ec2Call).purchaseCapacityBlock,
		params: []string{"CapacityBlockOfferingId", "InstancePlatform", "TagSpecification"}},
	"DescribeCapacityReservations": {uc: "ListBlocks", run: (*ec2Call).describeCapacityReservations,
		params: []string{"CapacityReservationId", "Filter", "MaxResults", "NextToken"}},
	"DescribeCapacityBlocks": {uc: "ListBlocks", run: (*ec2Call).describeCapacityBlocks,
		params: []string{"CapacityBlockId", "Filter", "MaxResults", "NextToken"}},
	"DescribeCapacityBlockStatus": {uc: "BlockStatus", run: (*ec2Call).describeCapacityBlockStatus,
		params: []string{"CapacityBlockId", "Filter", "MaxResults", "NextToken"}},
	"DescribeCapacityBlockExtensionOfferings": {uc: "ExtensionOfferings", run: (*ec2Call).describeCapacityBlockExtensionOfferings,
		params: []string{"CapacityReservationId", "CapacityBlockExtensionDurationHours", "MaxResults", "NextToken"}},
	"PurchaseCapacityBlockExtension": {uc: "Extend", mutating: true, run: (*ec2Call).purchaseCapacityBlockExtension,
		params: []string{"CapacityReservationId", "CapacityBlockExtensionOfferingId"}},
	"DescribeCapacityBlockExtensionHistory": {uc: "Events", run: (*ec2Call).describeCapacityBlockExtensionHistory,
		params: []string{"CapacityReservationId", "Filter", "MaxResults", "NextToken"}},
	"CancelCapacityReservation": {uc: "CancelBlock", mutating: true, run: (*ec2Call).cancelCapacityReservation,
		params: []string{"CapacityReservationId", "ApplyCancellationCharges", "QuoteId"}},
}

// mustHaveAccessRules panics when an action names a use case that
// contract's access table lacks: every call of it would be refused.
func mustHaveAccessRules() {
	for action, op := range ec2Ops {
		if _, ok := contract.RuleOf(op.uc); !ok {
			panic(fmt.Sprintf("awsapi: EC2 action %s calls use case %s, which has no access rule", action, op.uc))
		}
	}
}

// EC2UseCases returns the use case each EC2 action calls, by action.
func EC2UseCases() map[string]contract.UseCase {
	out := make(map[string]contract.UseCase, len(ec2Ops))
	for action, op := range ec2Ops {
		out[action] = op.uc
	}
	return out
}

// ec2Call is one EC2 action being answered.
type ec2Call struct {
	h      *handler
	ctx    context.Context
	p      core.Principal
	action string
	params url.Values
	id     string // the request id
	// subject is the reservation the action names, for the audit log.
	subject string
	// fleet is the fleet as the call found it: its types and limits.
	fleet core.Fleet
}

func (h *handler) serveEC2(w http.ResponseWriter, r *http.Request, p core.Principal, body []byte, requestID string) {
	reply := ec2Replier{w: w, requestID: requestID}
	c := &ec2Call{h: h, ctx: contract.WithPrincipal(r.Context(), p), p: p, id: requestID}
	op, perr := c.parse(r, body)
	if perr != nil {
		reply.fail(perr.status, perr.code, perr.msg)
		return
	}
	var intent *contract.AuditIntent
	if op.mutating {
		intent = contract.NewAuditIntent(c.auditRecord(r.Method, http.StatusOK, ""))
		c.ctx = contract.WithAudit(c.ctx, intent)
	}
	out, err := c.authorizeAndRun(op)
	if err != nil {
		e := toEC2Error(err, nil)
		if e == nil {
			h.opts.Logger.Error("aws: EC2 "+c.action, "err", err, "requestId", requestID)
			e = ec2Errorf(http.StatusInternalServerError, "InternalError", internalMessage)
		}
		reply.fail(e.status, e.code, e.msg)
		if intent != nil && !intent.Stored() {
			h.svc.RecordAudit(c.ctx, c.auditRecord(r.Method, e.status, e.code))
		}
		return
	}
	reply.ok(c.action, out)
	if intent != nil && !intent.Stored() {
		h.svc.RecordAudit(c.ctx, c.auditRecord(r.Method, http.StatusOK, contract.OutcomeOK))
	}
}

// parse reads the call's parameters and finds its action.
func (c *ec2Call) parse(r *http.Request, body []byte) (ec2Op, *ec2Error) {
	raw := r.URL.RawQuery
	if r.Method == http.MethodPost {
		raw = string(body)
	}
	params, err := url.ParseQuery(raw)
	if err != nil {
		return ec2Op{}, ec2Errorf(http.StatusBadRequest, "MalformedQueryString", "the parameters are not form-encoded: %v", err)
	}
	c.params = params
	c.action = params.Get("Action")
	if c.action == "" {
		return ec2Op{}, missingParameter("Action")
	}
	op, ok := ec2Ops[c.action]
	if !ok {
		return ec2Op{}, ec2Errorf(http.StatusBadRequest, "InvalidAction", "the action %s is not valid for this web service; capblock answers %s", c.action, strings.Join(ec2Actions(), ", "))
	}
	switch v := params.Get("Version"); v {
	case ec2Version:
	case "":
		return ec2Op{}, missingParameter("Version")
	default:
		return ec2Op{}, ec2Errorf(http.StatusBadRequest, "NoSuchVersion", "API version %s is not served; use %s", v, ec2Version)
	}
	for name := range params {
		first, _, _ := strings.Cut(name, ".")
		if first != "Action" && first != "Version" && first != "DryRun" && !slices.Contains(op.params, first) {
			return ec2Op{}, ec2Errorf(http.StatusBadRequest, "UnknownParameter", "the parameter %s is not recognized by %s", name, c.action)
		}
	}
	if v := params.Get("NextToken"); v != "" {
		return ec2Op{}, invalidParameter("NextToken %q: every answer here is one page; there is no next one", v)
	}
	return op, nil
}

func ec2Actions() []string {
	names := make([]string, 0, len(ec2Ops))
	for n := range ec2Ops {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// authorizeAndRun asks contract's access table whether the caller may
// call the action's use case (before reading its parameters, and to
// answer a dry run), and runs the action, whose calls the service checks
// in full.
func (c *ec2Call) authorizeAndRun(op ec2Op) (any, error) {
	if err := contract.Permitted(c.ctx, op.uc); err != nil {
		return nil, err
	}
	f, err := c.h.svc.Fleet(c.ctx)
	if err != nil {
		return nil, err
	}
	c.fleet = f
	dry, err := c.boolParam("DryRun")
	if err != nil {
		return nil, err
	}
	if dry {
		return nil, ec2Errorf(http.StatusPreconditionFailed, "DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
	}
	return op.run(c)
}

// auditRecord is the record of the call as it ended with status and
// outcome ("" while it runs).
func (c *ec2Call) auditRecord(method string, status int, outcome string) core.AuditRecord {
	subject := c.subject
	if subject == "" {
		subject = c.params.Get("CapacityReservationId")
	}
	return core.AuditRecord{
		User: c.p.User.ID, Team: c.p.User.Team, TokenID: c.p.TokenID,
		Method: method, Route: "/aws EC2 " + c.action, Subject: subject,
		Status: status, Outcome: outcome,
	}
}

// str is a parameter's value ("" when absent).
func (c *ec2Call) str(name string) string { return c.params.Get(name) }

// required is a parameter's value, or MissingParameter.
func (c *ec2Call) required(name string) (string, error) {
	v := c.params.Get(name)
	if v == "" {
		return "", missingParameter(name)
	}
	return v, nil
}

// intParam reads a whole number in [lo, hi]; ok is false when absent.
func (c *ec2Call) intParam(name string, lo, hi int) (v int, ok bool, err error) {
	s := c.params.Get(name)
	if s == "" {
		return 0, false, nil
	}
	v, err = strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		return 0, false, invalidParameter("%s %q must be a whole number from %d to %d", name, s, lo, hi)
	}
	return v, true, nil
}

func (c *ec2Call) boolParam(name string) (bool, error) {
	switch s := c.params.Get(name); s {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, invalidParameter("%s %q must be true or false", name, s)
	}
}

// timeParam reads an ISO 8601 time, as the SDKs send them.
func (c *ec2Call) timeParam(name string) (time.Time, error) {
	s := c.params.Get(name)
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, invalidParameter("%s %q is not a time like 2026-12-01T10:00:00Z", name, s)
	}
	return t, nil
}

// list reads the flattened list name.1, name.2, … in order.
func (c *ec2Call) list(name string) []string {
	var vs []string
	for i := 1; ; i++ {
		v, ok := c.params[fmt.Sprintf("%s.%d", name, i)]
		if !ok {
			return vs
		}
		vs = append(vs, v[0])
	}
}

// filter is one Filter.N: a name and the values any of which matches.
type filter struct {
	name   string
	values []string
}

func (c *ec2Call) filters() ([]filter, error) {
	var fs []filter
	for i := 1; ; i++ {
		prefix := fmt.Sprintf("Filter.%d", i)
		name := c.params.Get(prefix + ".Name")
		if name == "" {
			if c.hasPrefix(prefix + ".") {
				return nil, missingParameter(prefix + ".Name")
			}
			return fs, nil
		}
		fs = append(fs, filter{name: name, values: c.list(prefix + ".Value")})
	}
}

func (c *ec2Call) hasPrefix(prefix string) bool {
	for k := range c.params {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// The bounds of a purchase's tags, as the REST API has them.
const (
	maxTags        = 50
	maxTagKeyLen   = 128
	maxTagValueLen = 256
)

// tags reads the TagSpecification.N of resource type capacity-reservation
// (or none named).
func (c *ec2Call) tags() (map[string]string, error) {
	tags := map[string]string{}
	for i := 1; ; i++ {
		prefix := fmt.Sprintf("TagSpecification.%d", i)
		if !c.hasPrefix(prefix + ".") {
			break
		}
		switch rt := c.str(prefix + ".ResourceType"); rt {
		case "", "capacity-reservation", "capacity-block":
		default:
			return nil, invalidParameter("%s.ResourceType %q: a capacity block's tags are of capacity-reservation", prefix, rt)
		}
		for j := 1; ; j++ {
			tp := fmt.Sprintf("%s.Tag.%d", prefix, j)
			key, hasKey := c.params[tp+".Key"]
			if !hasKey {
				if c.hasPrefix(tp + ".") {
					return nil, missingParameter(tp + ".Key")
				}
				break
			}
			value := c.str(tp + ".Value")
			if n := utf8.RuneCountInString(key[0]); n == 0 || n > maxTagKeyLen {
				return nil, invalidParameter("%s.Key must be 1 to %d characters", tp, maxTagKeyLen)
			}
			if utf8.RuneCountInString(value) > maxTagValueLen {
				return nil, invalidParameter("%s.Value must be at most %d characters", tp, maxTagValueLen)
			}
			tags[key[0]] = value
		}
	}
	if len(tags) > maxTags {
		return nil, invalidParameter("%d tags: at most %d", len(tags), maxTags)
	}
	if len(tags) == 0 {
		return nil, nil
	}
	return tags, nil
}
