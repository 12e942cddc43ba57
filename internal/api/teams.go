package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// registerTeams declares "Teams and access": teams, users, tokens, quotas,
// budgets and the ledger.
func (s *server) registerTeams(api huma.API) {
	create := s.operation("createTeam", http.MethodPost, "/v1/teams", "teams", "Create a team (admin)")
	create.DefaultStatus = http.StatusCreated
	huma.Register(api, create, s.createTeam)
	huma.Register(api, s.operation("listTeams", http.MethodGet, "/v1/teams", "teams", "List teams: all for an admin, one's own otherwise"), s.listTeams)
	huma.Register(api, s.operation("getTeam", http.MethodGet, "/v1/teams/{id}", "teams", "Get a team"), s.getTeam)
	huma.Register(api, s.operation("putQuotas", http.MethodPut, "/v1/teams/{id}/quotas", "teams", "Set a team's quota, for all instance types or one (admin)"), s.putQuotas)
	huma.Register(api, s.operation("getQuotas", http.MethodGet, "/v1/teams/{id}/quotas", "teams", "A team's quotas"), s.getQuotas)
	huma.Register(api, s.operation("putBudget", http.MethodPut, "/v1/teams/{id}/budget", "teams", "Set a team's budget (admin)"), s.putBudget)
	huma.Register(api, s.operation("getLedger", http.MethodGet, "/v1/teams/{id}/ledger", "teams", "A team's charges and refunds, spend and budget"), s.getLedger)

	user := s.operation("createUser", http.MethodPost, "/v1/users", "teams", "Create a user in a team with a role (admin)")
	user.DefaultStatus = http.StatusCreated
	huma.Register(api, user, s.createUser)
	huma.Register(api, s.operation("listUsers", http.MethodGet, "/v1/users", "teams", "List users: all for an admin, one's team otherwise"), s.listUsers)
	huma.Register(api, s.operation("whoami", http.MethodGet, "/v1/whoami", "teams", "The user and token a request authenticates as"), s.whoami)
	token := s.operation("createToken", http.MethodPost, "/v1/users/{id}/tokens", "teams", "Create an API token; it is shown this once")
	token.Description = "A token never outlives the token of the request that makes it: a longer expiresIn is refused (400 invalid_argument), " +
		"and without expiresIn the new token expires when that one does (never, if it never does). " +
		"A user holds at most 20 live tokens (neither revoked nor expired); one more is refused with 409 conflict until one is revoked or expires. " +
		"Request rates are limited per user: all of a user's tokens share one limit."
	token.DefaultStatus = http.StatusCreated
	huma.Register(api, token, s.createToken)
	huma.Register(api, s.operation("listTokens", http.MethodGet, "/v1/tokens", "teams", "List tokens: all for an admin, one's own otherwise"), s.listTokens)
	huma.Register(api, s.operation("revokeToken", http.MethodDelete, "/v1/tokens/{id}", "teams", "Revoke a token, at once"), s.revokeToken)
}

type teamJSON struct {
	ID         string     `json:"id" example:"team-0a1b2c3d4e5f6a7b8"`
	Name       string     `json:"name" example:"research"`
	CreatedAt  time.Time  `json:"createdAt"`
	DisabledAt *time.Time `json:"disabledAt,omitempty" doc:"When an administrator disabled the team; absent when it is enabled."`
}

func toTeam(t core.Team) teamJSON {
	return teamJSON{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt.UTC(), DisabledAt: optionalTime(t.DisabledAt)}
}

type createTeamInput struct {
	Body struct {
		Name string `json:"name" minLength:"1" maxLength:"63" example:"research"`
	}
}

func (s *server) createTeam(ctx context.Context, in *createTeamInput) (*out[teamJSON], error) {
	t, err := s.svc.CreateTeam(ctx, in.Body.Name)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toTeam(t))
}

type teamsJSON struct {
	Teams []teamJSON `json:"teams"`
}

func (s *server) listTeams(ctx context.Context, _ *struct{}) (*out[teamsJSON], error) {
	ts, err := s.svc.Teams(ctx, scopeOf(ctx))
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	resp := teamsJSON{Teams: make([]teamJSON, 0, len(ts))}
	for _, t := range ts {
		resp.Teams = append(resp.Teams, toTeam(t))
	}
	return reply(resp)
}

type teamIDInput struct {
	ID string `path:"id" doc:"Team id."`
}

func (s *server) getTeam(ctx context.Context, in *teamIDInput) (*out[teamJSON], error) {
	t, err := s.svc.Team(ctx, scopeOf(ctx), in.ID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toTeam(t))
}

type quotaJSON struct {
	InstanceType         string `json:"instanceType,omitempty" doc:"The type this row is for; all types when empty."`
	MaxInstancesPerBlock int    `json:"maxInstancesPerBlock" minimum:"0" maximum:"100000" doc:"0: the operator's default (64)."`
	MaxInstancesHeld     int    `json:"maxInstancesHeld" minimum:"0" maximum:"1000000" doc:"Instances held at once; 0: the default (256)."`
	MaxDurationHours     int    `json:"maxDurationHours" minimum:"0" maximum:"1000000" doc:"Longest block; 0: the operator's limit."`
	MaxLeadDays          int    `json:"maxLeadDays" minimum:"0" maximum:"100000" doc:"How far ahead a block may start; 0: the operator's limit."`
}

func toQuota(q core.Quota) quotaJSON {
	return quotaJSON{InstanceType: q.InstanceType, MaxInstancesPerBlock: q.MaxInstancesPerBlock, MaxInstancesHeld: q.MaxInstancesHeld,
		MaxDurationHours: int(q.MaxDuration / time.Hour), MaxLeadDays: int(q.MaxLead / (24 * time.Hour))}
}

type putQuotasInput struct {
	ID   string `path:"id" doc:"Team id."`
	Body quotaJSON
}

func (s *server) putQuotas(ctx context.Context, in *putQuotasInput) (*out[quotaJSON], error) {
	b := in.Body
	q, err := s.svc.PutQuota(ctx, core.Quota{Team: in.ID, InstanceType: b.InstanceType, MaxInstancesPerBlock: b.MaxInstancesPerBlock,
		MaxInstancesHeld: b.MaxInstancesHeld, MaxDuration: hours(b.MaxDurationHours), MaxLead: hours(24 * b.MaxLeadDays)})
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toQuota(q))
}

type quotasJSON struct {
	Quotas []quotaJSON `json:"quotas"`
}

func (s *server) getQuotas(ctx context.Context, in *teamIDInput) (*out[quotasJSON], error) {
	qs, err := s.svc.Quotas(ctx, scopeOf(ctx), in.ID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	resp := quotasJSON{Quotas: make([]quotaJSON, 0, len(qs))}
	for _, q := range qs {
		resp.Quotas = append(resp.Quotas, toQuota(q))
	}
	return reply(resp)
}

type budgetJSON struct {
	Amount moneyJSON `json:"amount"`
	Period string    `json:"period" enum:"month,total,none"`
}

type putBudgetInput struct {
	ID   string `path:"id" doc:"Team id."`
	Body budgetJSON
}

func (s *server) putBudget(ctx context.Context, in *putBudgetInput) (*out[budgetJSON], error) {
	amount, err := core.ParseMoney(in.Body.Amount.Amount, in.Body.Amount.Currency)
	if err != nil {
		return nil, invalid("amount: %v", err)
	}
	b, err := s.svc.PutBudget(ctx, core.Budget{Team: in.ID, Amount: amount, Period: in.Body.Period})
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(budgetJSON{Amount: toMoney(b.Amount), Period: b.Period})
}

type ledgerEntryJSON struct {
	ID        string    `json:"id"`
	JournalID string    `json:"journalId" doc:"The movement of money the line is part of."`
	Seq       int64     `json:"seq" doc:"The journal's order: entries are listed by it."`
	Time      time.Time `json:"time"`
	Kind      string    `json:"kind" enum:"charge,refund,credit" doc:"charge: the team paid; refund: some of it came back; credit: income from another team or the operator (a transfer's price, a resale, lending)."`
	Amount    moneyJSON `json:"amount"`
	Subject   string    `json:"subject" doc:"The block (or preemptible job) the line is about."`
}

// cashJSON is contract.Cash.
type cashJSON struct {
	Gross   moneyJSON `json:"gross" doc:"What the team was charged."`
	Refunds moneyJSON `json:"refunds" doc:"What came back of it."`
	Credits moneyJSON `json:"credits" doc:"Income from others: transfer prices, resale and lending credits."`
	Net     moneyJSON `json:"net" doc:"gross - refunds - credits."`
}

func toCash(c contract.Cash) cashJSON {
	return cashJSON{Gross: toMoney(c.Gross), Refunds: toMoney(c.Refunds), Credits: toMoney(c.Credits), Net: toMoney(c.Net)}
}

type ledgerJSON struct {
	Entries []ledgerEntryJSON `json:"entries"`
	Spent   moneyJSON         `json:"spent" doc:"What the budget counts in its current period (all time without a budget): charges less refunds, and less credits only where the fleet's budgetCountsCredits says so."`
	cashJSON
	Budget *budgetJSON `json:"budget,omitempty"`
}

func (s *server) getLedger(ctx context.Context, in *teamIDInput) (*out[ledgerJSON], error) {
	v, err := s.svc.Ledger(ctx, scopeOf(ctx), in.ID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	resp := ledgerJSON{Entries: make([]ledgerEntryJSON, 0, len(v.Entries)), Spent: toMoney(v.Spent), cashJSON: toCash(v.Cash)}
	for _, e := range v.Entries {
		resp.Entries = append(resp.Entries, ledgerEntryJSON{ID: e.ID, JournalID: e.Journal, Seq: e.Seq, Time: e.Time.UTC(),
			Kind: e.Kind, Amount: toMoney(e.Amount), Subject: e.Subject})
	}
	if v.Budget != nil {
		resp.Budget = &budgetJSON{Amount: toMoney(v.Budget.Amount), Period: v.Budget.Period}
	}
	return reply(resp)
}

type userJSON struct {
	ID         string     `json:"id" example:"usr-0a1b2c3d4e5f6a7b8"`
	Name       string     `json:"name" example:"ada"`
	Team       string     `json:"team"`
	Role       string     `json:"role" enum:"admin,member,viewer"`
	CreatedAt  time.Time  `json:"createdAt"`
	DisabledAt *time.Time `json:"disabledAt,omitempty" doc:"When an administrator disabled the user; absent when enabled."`
}

func toUser(u core.User) userJSON {
	return userJSON{ID: u.ID, Name: u.Name, Team: u.Team, Role: string(u.Role), CreatedAt: u.CreatedAt.UTC(), DisabledAt: optionalTime(u.DisabledAt)}
}

type createUserInput struct {
	Body struct {
		Name string `json:"name" minLength:"1" maxLength:"63"`
		Team string `json:"team" minLength:"1" maxLength:"64" doc:"Team id."`
		Role string `json:"role" enum:"admin,member,viewer"`
	}
}

func (s *server) createUser(ctx context.Context, in *createUserInput) (*out[userJSON], error) {
	u, err := s.svc.CreateUser(ctx, in.Body.Name, in.Body.Team, core.Role(in.Body.Role))
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toUser(u))
}

type usersJSON struct {
	Users []userJSON `json:"users"`
}

func (s *server) listUsers(ctx context.Context, _ *struct{}) (*out[usersJSON], error) {
	us, err := s.svc.Users(ctx, scopeOf(ctx))
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	resp := usersJSON{Users: make([]userJSON, 0, len(us))}
	for _, u := range us {
		resp.Users = append(resp.Users, toUser(u))
	}
	return reply(resp)
}

type whoamiJSON struct {
	User    userJSON `json:"user"`
	TokenID string   `json:"tokenId"`
}

func (s *server) whoami(ctx context.Context, _ *struct{}) (*out[whoamiJSON], error) {
	p, err := s.svc.WhoAmI(ctx)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(whoamiJSON{User: toUser(p.User), TokenID: p.TokenID})
}

type tokenJSON struct {
	ID        string     `json:"id" example:"tok-0a1b2c3d4e5f6a7b8"`
	User      string     `json:"user"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
}

func toToken(t core.Token) tokenJSON {
	return tokenJSON{ID: t.ID, User: t.User, CreatedAt: t.CreatedAt.UTC(), ExpiresAt: optionalTime(t.ExpiresAt), RevokedAt: optionalTime(t.RevokedAt)}
}

type createTokenInput struct {
	ID   string `path:"id" doc:"User id."`
	Body *struct {
		ExpiresIn string `json:"expiresIn,omitempty" example:"720h" doc:"Lifetime as a Go duration, at most until the token of the request expires; when empty, the new token expires with that token (never, if it never expires)."`
	}
}

type newTokenJSON struct {
	tokenJSON
	Token string `json:"token" doc:"The token itself, shown this once."`
}

func (s *server) createToken(ctx context.Context, in *createTokenInput) (*out[newTokenJSON], error) {
	var expiresIn time.Duration
	if in.Body != nil && in.Body.ExpiresIn != "" {
		d, err := parseDuration("body.expiresIn", in.Body.ExpiresIn, time.Minute, 10*365*24*time.Hour)
		if err != nil {
			return nil, invalid("%s", err)
		}
		expiresIn = d
	}
	t, secret, err := s.svc.CreateToken(ctx, in.ID, expiresIn)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(newTokenJSON{tokenJSON: toToken(t), Token: secret})
}

type tokensJSON struct {
	Tokens []tokenJSON `json:"tokens"`
}

func (s *server) listTokens(ctx context.Context, _ *struct{}) (*out[tokensJSON], error) {
	ts, err := s.svc.Tokens(ctx)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	resp := tokensJSON{Tokens: make([]tokenJSON, 0, len(ts))}
	for _, t := range ts {
		resp.Tokens = append(resp.Tokens, toToken(t))
	}
	return reply(resp)
}

type tokenIDInput struct {
	ID string `path:"id" doc:"Token id."`
}

func (s *server) revokeToken(ctx context.Context, in *tokenIDInput) (*out[tokenJSON], error) {
	t, err := s.svc.RevokeToken(ctx, in.ID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toToken(t))
}

// registerAudit declares the audit log, for admins.
func (s *server) registerAudit(api huma.API) {
	huma.Register(api, s.operation("listAudit", http.MethodGet, "/v1/audit", "operations",
		"Mutating requests: who, which token, what, when, the outcome (admin)"), s.listAudit)
}

type auditInput struct {
	After string `query:"after" doc:"Cursor: the next of the previous answer."`
}

type auditRecordJSON struct {
	Seq     int64     `json:"seq"`
	Time    time.Time `json:"time"`
	User    string    `json:"user"`
	Team    string    `json:"team"`
	TokenID string    `json:"tokenId"`
	Method  string    `json:"method"`
	Route   string    `json:"route"`
	Subject string    `json:"subject,omitempty"`
	Status  int       `json:"status"`
	Outcome string    `json:"outcome"`
}

type auditJSON struct {
	Records []auditRecordJSON `json:"records"`
	Next    string            `json:"next"`
}

func (s *server) listAudit(ctx context.Context, in *auditInput) (*out[auditJSON], error) {
	var after int64
	if in.After != "" {
		n, err := strconv.ParseInt(in.After, 10, 64)
		if err != nil || n < 0 {
			return nil, invalid("query.after: %q is not a cursor this server returned", in.After)
		}
		after = n
	}
	rs, err := s.svc.Audit(ctx, after, 500)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	resp := auditJSON{Records: make([]auditRecordJSON, 0, len(rs)), Next: strconv.FormatInt(after, 10)}
	for _, r := range rs {
		resp.Records = append(resp.Records, auditRecordJSON{Seq: r.Seq, Time: r.Time.UTC(), User: r.User, Team: r.Team, TokenID: r.TokenID,
			Method: r.Method, Route: r.Route, Subject: r.Subject, Status: r.Status, Outcome: r.Outcome})
		resp.Next = strconv.FormatInt(r.Seq, 10)
	}
	return reply(resp)
}
