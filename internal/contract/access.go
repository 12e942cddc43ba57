package contract

import (
	"context"
	"fmt"
	"slices"

	"capblock/internal/core"
)

// UseCase names one call of the Service: the name of its method.
type UseCase string

// Reach is how far a use case may reach: which things of which team.
type Reach uint8

const (
	// reachNone is the zero Reach: a rule without one denies.
	reachNone Reach = iota
	// ReachFleet is the fleet's own facts and the operator's acts
	// (instance types, availability, nodes, approvals, teams made): no
	// team's things, so only the role is checked.
	ReachFleet
	// ReachTeam is one team's things (its blocks, plans, jobs, money),
	// named by the call's team or scope argument: the caller's own team,
	// or, for an admin, any team or "" (every team). A non-admin naming
	// no team, or another team, is refused.
	ReachTeam
	// ReachOwn is the caller's own credentials (tokens, access keys); an
	// admin's, anyone's. The use case applies who the caller is.
	ReachOwn
)

func (r Reach) String() string {
	switch r {
	case ReachFleet:
		return "fleet"
	case ReachTeam:
		return "team"
	case ReachOwn:
		return "own"
	}
	return "none"
}

// Rule is what a use case needs: the caller's least role, and its reach.
type Rule struct {
	Role  core.Role
	Reach Reach
}

// access is the one access table: for every method of Service, the role
// it needs and how it is scoped. The service checks it on every call
// (Authorize, AuthorizeTeam); front ends only translate, and their
// authorization matrices, the README's access table and the OpenAPI
// document's are made from it. A use case not listed here is refused.
var access = map[UseCase]Rule{
	// The fleet and the search for capacity.
	"Fleet":           {core.RoleViewer, ReachFleet},
	"Nodes":           {core.RoleViewer, ReachFleet},
	"Availability":    {core.RoleViewer, ReachFleet},
	"Offerings":       {core.RoleViewer, ReachTeam}, // bounded by the team's quota
	"PriceCalendar":   {core.RoleViewer, ReachTeam},
	"FleetCalendar":   {core.RoleViewer, ReachTeam}, // others' blocks as counts only
	"PlanOfferings":   {core.RoleViewer, ReachTeam},
	"SeriesOfferings": {core.RoleViewer, ReachTeam}, // a search: it stores nothing
	"Clock":           {core.RoleViewer, ReachFleet},

	// Blocks.
	"Purchase":           {core.RoleMember, ReachTeam},
	"ListBlocks":         {core.RoleViewer, ReachTeam},
	"GetBlock":           {core.RoleViewer, ReachTeam},
	"BlockStatus":        {core.RoleViewer, ReachTeam},
	"BlockDetail":        {core.RoleViewer, ReachTeam},
	"CancelQuote":        {core.RoleViewer, ReachTeam},
	"CancelBlock":        {core.RoleMember, ReachTeam},
	"ExtensionOfferings": {core.RoleViewer, ReachTeam},
	"Extend":             {core.RoleMember, ReachTeam},
	"TransferBlock":      {core.RoleMember, ReachTeam}, // and the fleet's transfer policy
	"ReleaseBlock":       {core.RoleMember, ReachTeam},
	"SetLending":         {core.RoleMember, ReachTeam},
	"Utilisation":        {core.RoleViewer, ReachTeam},

	// Plans, series and standing orders.
	"PurchasePlan":   {core.RoleMember, ReachTeam},
	"ListPlans":      {core.RoleViewer, ReachTeam},
	"GetPlan":        {core.RoleViewer, ReachTeam},
	"CancelPlan":     {core.RoleMember, ReachTeam},
	"PurchaseSeries": {core.RoleMember, ReachTeam},
	"ListSeries":     {core.RoleViewer, ReachTeam},
	"GetSeries":      {core.RoleViewer, ReachTeam},
	"CancelSeries":   {core.RoleMember, ReachTeam},
	"CreateOrder":    {core.RoleMember, ReachTeam},
	"ListOrders":     {core.RoleViewer, ReachTeam},
	"GetOrder":       {core.RoleViewer, ReachTeam},
	"CancelOrder":    {core.RoleMember, ReachTeam},

	// Events and webhooks.
	"Events":        {core.RoleViewer, ReachTeam},
	"CreateWebhook": {core.RoleMember, ReachTeam},
	"ListWebhooks":  {core.RoleViewer, ReachTeam},
	"DeleteWebhook": {core.RoleMember, ReachTeam},
	"Deliveries":    {core.RoleViewer, ReachTeam},

	// Jobs.
	"CreateJob": {core.RoleMember, ReachTeam},
	"ListJobs":  {core.RoleViewer, ReachTeam},
	"GetJob":    {core.RoleViewer, ReachTeam},
	"JobLogs":   {core.RoleViewer, ReachTeam},
	"StopJob":   {core.RoleMember, ReachTeam},

	// Money.
	"Quotas": {core.RoleViewer, ReachTeam},
	"Ledger": {core.RoleViewer, ReachTeam},
	"Spend":  {core.RoleViewer, ReachTeam},

	// Teams, users and credentials.
	"Teams":           {core.RoleViewer, ReachTeam},
	"Team":            {core.RoleViewer, ReachTeam},
	"Users":           {core.RoleViewer, ReachTeam},
	"WhoAmI":          {core.RoleViewer, ReachOwn},
	"CreateToken":     {core.RoleViewer, ReachOwn},
	"Tokens":          {core.RoleViewer, ReachOwn},
	"RevokeToken":     {core.RoleViewer, ReachOwn},
	"CreateAccessKey": {core.RoleViewer, ReachOwn},
	"AccessKeys":      {core.RoleViewer, ReachOwn},
	"RevokeAccessKey": {core.RoleViewer, ReachOwn},

	// The operator's acts.
	"ApproveBlock":    {core.RoleAdmin, ReachFleet},
	"FailNode":        {core.RoleAdmin, ReachFleet},
	"RecoverNode":     {core.RoleAdmin, ReachFleet},
	"SetClock":        {core.RoleAdmin, ReachFleet},
	"CreateTeam":      {core.RoleAdmin, ReachFleet},
	"CreateUser":      {core.RoleAdmin, ReachFleet},
	"SetUserDisabled": {core.RoleAdmin, ReachFleet},
	"SetTeamDisabled": {core.RoleAdmin, ReachFleet},
	"PutQuota":        {core.RoleAdmin, ReachFleet},
	"PutBudget":       {core.RoleAdmin, ReachFleet},
	"Audit":           {core.RoleAdmin, ReachFleet},
}

// RuleOf is the rule of a use case; ok is false for one the table does
// not list, which every check refuses.
func RuleOf(uc UseCase) (r Rule, ok bool) {
	r, ok = access[uc]
	return r, ok
}

// UseCases lists the use cases of the access table, sorted.
func UseCases() []UseCase {
	out := make([]UseCase, 0, len(access))
	for uc := range access {
		out = append(out, uc)
	}
	slices.Sort(out)
	return out
}

type principalKey struct{}

// WithPrincipal is ctx acting as p, whom a front end authenticated (a
// token, an access key, a namespace's team): every Service call made with
// it is checked against p.
func WithPrincipal(ctx context.Context, p core.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalOf is who ctx acts as; ok is false when no one does.
func PrincipalOf(ctx context.Context) (p core.Principal, ok bool) {
	p, ok = ctx.Value(principalKey{}).(core.Principal)
	return p, ok && p.User.ID != ""
}

// Authorize checks that ctx's principal may call uc, a use case of
// ReachFleet or ReachOwn, and returns the principal. A call with no
// principal wraps core.ErrUnauthenticated; a role too low, a use case the
// table does not list, or one of ReachTeam (which must name its team:
// AuthorizeTeam) wraps core.ErrForbidden.
func Authorize(ctx context.Context, uc UseCase) (core.Principal, error) {
	p, r, err := check(ctx, uc)
	if err != nil {
		return core.Principal{}, err
	}
	if r.Reach == ReachTeam {
		return core.Principal{}, fmt.Errorf("%w: %s is checked without the team it acts on", core.ErrForbidden, uc)
	}
	return p, nil
}

// AuthorizeTeam checks that ctx's principal may call uc on team's things
// and returns the principal. team "" is every team, which only an admin
// reaches; a non-admin reaches its own team only. Errors as Authorize's.
func AuthorizeTeam(ctx context.Context, uc UseCase, team string) (core.Principal, error) {
	p, r, err := check(ctx, uc)
	if err != nil {
		return core.Principal{}, err
	}
	switch {
	case r.Reach == ReachFleet || r.Reach == ReachOwn:
		return p, nil
	case p.User.Role == core.RoleAdmin:
		return p, nil
	case team == "":
		return core.Principal{}, fmt.Errorf("%w: %s names no team, and only an admin acts on every team", core.ErrForbidden, uc)
	case team != p.User.Team:
		return core.Principal{}, fmt.Errorf("%w: only an admin may act for another team", core.ErrForbidden)
	}
	return p, nil
}

// Permitted checks ctx's principal's role for uc, without the team it acts
// on: a front end may ask it to refuse a request before reading its input
// (and to answer a dry run); the Service checks every call in full
// anyway. Errors as Authorize's.
func Permitted(ctx context.Context, uc UseCase) error {
	_, _, err := check(ctx, uc)
	return err
}

// check finds ctx's principal and uc's rule and checks the role.
func check(ctx context.Context, uc UseCase) (core.Principal, Rule, error) {
	p, ok := PrincipalOf(ctx)
	if !ok {
		return core.Principal{}, Rule{}, fmt.Errorf("%w: %s needs a caller, and this call names none", core.ErrUnauthenticated, uc)
	}
	r, ok := access[uc]
	if !ok || r.Reach == reachNone || r.Role == "" {
		return core.Principal{}, Rule{}, fmt.Errorf("%w: %s has no access rule", core.ErrForbidden, uc)
	}
	if !p.User.Role.Valid() || !p.User.Role.Allows(r.Role) {
		return core.Principal{}, Rule{}, &roleError{action: string(uc), need: r.Role, user: p.User}
	}
	if p.User.Role != core.RoleAdmin && p.User.Team == "" {
		return core.Principal{}, Rule{}, fmt.Errorf("%w: user %s belongs to no team", core.ErrForbidden, p.User.Name)
	}
	return p, r, nil
}

// roleError is a caller refused for its role. Its message is said to
// users as is, without the sentinel's prefix.
type roleError struct {
	action string
	need   core.Role
	user   core.User
}

func (e *roleError) Error() string {
	return fmt.Sprintf("%s needs the %s role; user %s is a %s", e.action, e.need, e.user.Name, e.user.Role)
}

func (e *roleError) Unwrap() error { return core.ErrForbidden }

// Scope is the team whose things p asks for when it names none: its own,
// or, for an admin, "" (every team). The Service refuses "" from anyone
// but an admin, so a front end that forgets to scope reads nothing.
func Scope(p core.Principal) string {
	if p.User.Role == core.RoleAdmin {
		return ""
	}
	return p.User.Team
}

// TeamOf is the team that p buys for (a block, a plan) or makes a webhook
// for, given the team the request names, if any: the named one, else p's
// own. Whether p may act for it is the Service's to decide.
func TeamOf(p core.Principal, named string) string {
	if named == "" {
		return p.User.Team
	}
	return named
}
