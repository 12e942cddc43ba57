package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"capblock/internal/clock"
	"capblock/internal/contract"
	"capblock/internal/core"
)

// Guarded is the Service as every front end reaches it: each call is
// checked against contract's access table, from the principal in its
// context, before the use case runs. A call with no principal is refused;
// so is a role too low, or a team or scope that is not the caller's own
// (unless the caller is an admin). Fronts translate; this decides.
type Guarded struct {
	contract.Checked
	s *Service
}

// Guarded returns the Service that front ends are given.
func (s *Service) Guarded() *Guarded { return &Guarded{s: s} }

var (
	_ contract.Service = (*Guarded)(nil)
	_ contract.Gate    = (*Service)(nil)
	_ contract.Front   = (*Guarded)(nil)
)

// The Gate: before a principal is known.

func (g *Guarded) Authenticate(ctx context.Context, token string) (core.Principal, error) {
	return g.s.Authenticate(ctx, token)
}

func (g *Guarded) AuthenticateAccessKey(ctx context.Context, id string) (string, core.Principal, error) {
	return g.s.AuthenticateAccessKey(ctx, id)
}

func (g *Guarded) Workloads(ctx context.Context, team string) (core.Principal, error) {
	return g.s.Workloads(ctx, team)
}

func (g *Guarded) RecordAudit(ctx context.Context, r core.AuditRecord) { g.s.RecordAudit(ctx, r) }
func (g *Guarded) Ready(ctx context.Context) error                     { return g.s.Ready(ctx) }
func (g *Guarded) Now() time.Time                                      { return g.s.Now() }
func (g *Guarded) Simulated() bool                                     { return g.s.Simulated() }

// actFor checks that ctx's principal may do uc for team, which it names
// to buy or make something for: its own team, or, for an admin, a team
// that exists.
func (g *Guarded) actFor(ctx context.Context, uc contract.UseCase, team string) error {
	p, err := contract.AuthorizeTeam(ctx, uc, team)
	if err != nil {
		return err
	}
	switch {
	case team == "":
		return core.Invalidf("%s names no team to act for", uc)
	case team == p.User.Team:
		return nil
	}
	if _, err := g.s.Team(ctx, "", team); err != nil {
		if errors.Is(err, core.ErrNotFound) {
			return core.Invalidf("team %q does not exist (GET /v1/teams lists them)", team)
		}
		return err
	}
	return nil
}

// The fleet and the search for capacity.

func (g *Guarded) Fleet(ctx context.Context) (core.Fleet, error) {
	if _, err := contract.Authorize(ctx, "Fleet"); err != nil {
		return core.Fleet{}, err
	}
	return g.s.Fleet(), nil
}

func (g *Guarded) Nodes(ctx context.Context) ([]contract.NodeView, error) {
	if _, err := contract.Authorize(ctx, "Nodes"); err != nil {
		return nil, err
	}
	return g.s.Nodes(), nil
}

func (g *Guarded) Availability(ctx context.Context, instanceType, zone string, from, to time.Time) ([]core.Slot, error) {
	if _, err := contract.Authorize(ctx, "Availability"); err != nil {
		return nil, err
	}
	return g.s.Availability(ctx, instanceType, zone, from, to)
}

func (g *Guarded) Offerings(ctx context.Context, req core.SearchRequest) ([]core.Offering, error) {
	if _, err := contract.AuthorizeTeam(ctx, "Offerings", req.Team); err != nil {
		return nil, err
	}
	return g.s.Offerings(ctx, req)
}

func (g *Guarded) PriceCalendar(ctx context.Context, req core.SearchRequest) ([]core.PriceStart, error) {
	if _, err := contract.AuthorizeTeam(ctx, "PriceCalendar", req.Team); err != nil {
		return nil, err
	}
	return g.s.PriceCalendar(ctx, req)
}

func (g *Guarded) FleetCalendar(ctx context.Context, scope string, from time.Time, hours int) ([]core.PoolCalendar, error) {
	if _, err := contract.AuthorizeTeam(ctx, "FleetCalendar", scope); err != nil {
		return nil, err
	}
	return g.s.FleetCalendar(ctx, scope, from, hours)
}

func (g *Guarded) PlanOfferings(ctx context.Context, req core.PlanSearchRequest) ([]core.PlanOffering, error) {
	if _, err := contract.AuthorizeTeam(ctx, "PlanOfferings", req.Team); err != nil {
		return nil, err
	}
	return g.s.PlanOfferings(ctx, req)
}

func (g *Guarded) SeriesOfferings(ctx context.Context, req contract.SeriesSearchRequest) ([]core.SeriesOffering, error) {
	if _, err := contract.AuthorizeTeam(ctx, "SeriesOfferings", req.Team); err != nil {
		return nil, err
	}
	return g.s.SeriesOfferings(ctx, req)
}

// errWallClock answers the clock's use cases on a server without a
// simulated clock.
var errWallClock = fmt.Errorf("%w: this server runs on the wall clock, which no call moves (capblock serve --sim-clock runs on a simulated one)", core.ErrNotFound)

func (g *Guarded) Clock(ctx context.Context) (time.Time, error) {
	if _, err := contract.Authorize(ctx, "Clock"); err != nil {
		return time.Time{}, err
	}
	sim := g.s.SimClock()
	if sim == nil {
		return time.Time{}, errWallClock
	}
	return sim.Now(), nil
}

func (g *Guarded) SetClock(ctx context.Context, req contract.ClockRequest) (time.Time, error) {
	if _, err := contract.Authorize(ctx, "SetClock"); err != nil {
		return time.Time{}, err
	}
	sim := g.s.SimClock()
	if sim == nil {
		return time.Time{}, errWallClock
	}
	now, err := req.Apply(sim)
	if errors.Is(err, clock.ErrOutOfRange) {
		// The clock's message names the bound; the clock did not move.
		return now, core.Invalidf("%s", err)
	}
	return now, err
}

// Blocks.

func (g *Guarded) Purchase(ctx context.Context, req contract.PurchaseRequest) (core.Block, bool, error) {
	if err := g.actFor(ctx, "Purchase", req.Team); err != nil {
		return core.Block{}, false, err
	}
	return g.s.Purchase(ctx, req)
}

func (g *Guarded) ListBlocks(ctx context.Context, team string, state core.BlockState) ([]core.Block, error) {
	if _, err := contract.AuthorizeTeam(ctx, "ListBlocks", team); err != nil {
		return nil, err
	}
	return g.s.ListBlocks(ctx, team, state)
}

func (g *Guarded) GetBlock(ctx context.Context, team, id string) (core.Block, error) {
	if _, err := contract.AuthorizeTeam(ctx, "GetBlock", team); err != nil {
		return core.Block{}, err
	}
	return g.s.GetBlock(ctx, team, id)
}

func (g *Guarded) BlockStatus(ctx context.Context, team, id string) (contract.BlockStatus, error) {
	if _, err := contract.AuthorizeTeam(ctx, "BlockStatus", team); err != nil {
		return contract.BlockStatus{}, err
	}
	return g.s.BlockStatus(ctx, team, id)
}

func (g *Guarded) BlockDetail(ctx context.Context, team, id string) (contract.BlockDetail, error) {
	if _, err := contract.AuthorizeTeam(ctx, "BlockDetail", team); err != nil {
		return contract.BlockDetail{}, err
	}
	return g.s.BlockDetail(ctx, team, id)
}

func (g *Guarded) CancelQuote(ctx context.Context, team, id string) (core.Money, error) {
	if _, err := contract.AuthorizeTeam(ctx, "CancelQuote", team); err != nil {
		return core.Money{}, err
	}
	return g.s.CancelQuote(ctx, team, id)
}

func (g *Guarded) CancelBlock(ctx context.Context, team, id string) (core.Block, error) {
	if _, err := contract.AuthorizeTeam(ctx, "CancelBlock", team); err != nil {
		return core.Block{}, err
	}
	return g.s.CancelBlock(ctx, team, id)
}

func (g *Guarded) ApproveBlock(ctx context.Context, id string) (core.Block, error) {
	if _, err := contract.Authorize(ctx, "ApproveBlock"); err != nil {
		return core.Block{}, err
	}
	return g.s.ApproveBlock(ctx, id)
}

func (g *Guarded) ExtensionOfferings(ctx context.Context, team, id string, d time.Duration) ([]core.Offering, error) {
	if _, err := contract.AuthorizeTeam(ctx, "ExtensionOfferings", team); err != nil {
		return nil, err
	}
	return g.s.ExtensionOfferings(ctx, team, id, d)
}

func (g *Guarded) Extend(ctx context.Context, team, id, offeringID string) (contract.Extension, error) {
	if _, err := contract.AuthorizeTeam(ctx, "Extend", team); err != nil {
		return contract.Extension{}, err
	}
	return g.s.Extend(ctx, team, id, offeringID)
}

func (g *Guarded) TransferBlock(ctx context.Context, req contract.TransferRequest) (contract.HandOnResult, error) {
	if _, err := contract.AuthorizeTeam(ctx, "TransferBlock", req.Scope); err != nil {
		return contract.HandOnResult{}, err
	}
	return g.s.TransferBlock(ctx, req)
}

func (g *Guarded) ReleaseBlock(ctx context.Context, team, id string) (contract.HandOnResult, error) {
	if _, err := contract.AuthorizeTeam(ctx, "ReleaseBlock", team); err != nil {
		return contract.HandOnResult{}, err
	}
	return g.s.ReleaseBlock(ctx, team, id)
}

func (g *Guarded) SetLending(ctx context.Context, scope, id string, on bool) (core.Block, error) {
	if _, err := contract.AuthorizeTeam(ctx, "SetLending", scope); err != nil {
		return core.Block{}, err
	}
	return g.s.SetLending(ctx, scope, id, on)
}

func (g *Guarded) Utilisation(ctx context.Context, scope, team string, from, to time.Time) (contract.UtilisationReport, error) {
	if _, err := contract.AuthorizeTeam(ctx, "Utilisation", scope); err != nil {
		return contract.UtilisationReport{}, err
	}
	return g.s.Utilisation(ctx, scope, team, from, to)
}

// Plans, series and standing orders.

func (g *Guarded) PurchasePlan(ctx context.Context, req contract.PlanPurchaseRequest) (contract.PlanView, bool, error) {
	if err := g.actFor(ctx, "PurchasePlan", req.Team); err != nil {
		return contract.PlanView{}, false, err
	}
	return g.s.PurchasePlan(ctx, req)
}

func (g *Guarded) ListPlans(ctx context.Context, team string) ([]contract.PlanView, error) {
	if _, err := contract.AuthorizeTeam(ctx, "ListPlans", team); err != nil {
		return nil, err
	}
	return g.s.ListPlans(ctx, team)
}

func (g *Guarded) GetPlan(ctx context.Context, team, id string) (contract.PlanView, error) {
	if _, err := contract.AuthorizeTeam(ctx, "GetPlan", team); err != nil {
		return contract.PlanView{}, err
	}
	return g.s.GetPlan(ctx, team, id)
}

func (g *Guarded) CancelPlan(ctx context.Context, team, id string) (contract.PlanView, error) {
	if _, err := contract.AuthorizeTeam(ctx, "CancelPlan", team); err != nil {
		return contract.PlanView{}, err
	}
	return g.s.CancelPlan(ctx, team, id)
}

func (g *Guarded) PurchaseSeries(ctx context.Context, req contract.SeriesPurchaseRequest) (contract.SeriesView, bool, error) {
	if err := g.actFor(ctx, "PurchaseSeries", req.Team); err != nil {
		return contract.SeriesView{}, false, err
	}
	return g.s.PurchaseSeries(ctx, req)
}

func (g *Guarded) ListSeries(ctx context.Context, team string) ([]contract.SeriesView, error) {
	if _, err := contract.AuthorizeTeam(ctx, "ListSeries", team); err != nil {
		return nil, err
	}
	return g.s.ListSeries(ctx, team)
}

func (g *Guarded) GetSeries(ctx context.Context, team, id string) (contract.SeriesView, error) {
	if _, err := contract.AuthorizeTeam(ctx, "GetSeries", team); err != nil {
		return contract.SeriesView{}, err
	}
	return g.s.GetSeries(ctx, team, id)
}

func (g *Guarded) CancelSeries(ctx context.Context, team, id string) (contract.SeriesView, error) {
	if _, err := contract.AuthorizeTeam(ctx, "CancelSeries", team); err != nil {
		return contract.SeriesView{}, err
	}
	return g.s.CancelSeries(ctx, team, id)
}

func (g *Guarded) CreateOrder(ctx context.Context, req contract.OrderRequest) (core.Order, error) {
	if err := g.actFor(ctx, "CreateOrder", req.Team); err != nil {
		return core.Order{}, err
	}
	return g.s.CreateOrder(ctx, req)
}

func (g *Guarded) ListOrders(ctx context.Context, team string) ([]core.Order, error) {
	if _, err := contract.AuthorizeTeam(ctx, "ListOrders", team); err != nil {
		return nil, err
	}
	return g.s.ListOrders(ctx, team)
}

func (g *Guarded) GetOrder(ctx context.Context, team, id string) (core.Order, error) {
	if _, err := contract.AuthorizeTeam(ctx, "GetOrder", team); err != nil {
		return core.Order{}, err
	}
	return g.s.GetOrder(ctx, team, id)
}

func (g *Guarded) CancelOrder(ctx context.Context, team, id string) (core.Order, error) {
	if _, err := contract.AuthorizeTeam(ctx, "CancelOrder", team); err != nil {
		return core.Order{}, err
	}
	return g.s.CancelOrder(ctx, team, id)
}

// Events and webhooks.

func (g *Guarded) Events(ctx context.Context, team, after string, wait time.Duration) ([]core.Event, string, error) {
	if _, err := contract.AuthorizeTeam(ctx, "Events", team); err != nil {
		return nil, "", err
	}
	return g.s.Events(ctx, team, after, wait)
}

func (g *Guarded) CreateWebhook(ctx context.Context, team, url string, events []string) (core.Webhook, error) {
	if err := g.actFor(ctx, "CreateWebhook", team); err != nil {
		return core.Webhook{}, err
	}
	return g.s.CreateWebhook(ctx, team, url, events)
}

func (g *Guarded) ListWebhooks(ctx context.Context, scope string) ([]core.Webhook, error) {
	if _, err := contract.AuthorizeTeam(ctx, "ListWebhooks", scope); err != nil {
		return nil, err
	}
	return g.s.ListWebhooks(ctx, scope)
}

func (g *Guarded) DeleteWebhook(ctx context.Context, scope, id string) (core.Webhook, error) {
	if _, err := contract.AuthorizeTeam(ctx, "DeleteWebhook", scope); err != nil {
		return core.Webhook{}, err
	}
	return g.s.DeleteWebhook(ctx, scope, id)
}

func (g *Guarded) Deliveries(ctx context.Context, scope, id string) ([]core.Delivery, error) {
	if _, err := contract.AuthorizeTeam(ctx, "Deliveries", scope); err != nil {
		return nil, err
	}
	return g.s.Deliveries(ctx, scope, id)
}

// Jobs.

func (g *Guarded) CreateJob(ctx context.Context, scope string, req contract.JobRequest) (core.Job, error) {
	if _, err := contract.AuthorizeTeam(ctx, "CreateJob", scope); err != nil {
		return core.Job{}, err
	}
	if req.Team != "" {
		if err := g.actFor(ctx, "CreateJob", req.Team); err != nil {
			return core.Job{}, err
		}
	}
	return g.s.CreateJob(ctx, scope, req)
}

func (g *Guarded) ListJobs(ctx context.Context, scope string) ([]core.Job, error) {
	if _, err := contract.AuthorizeTeam(ctx, "ListJobs", scope); err != nil {
		return nil, err
	}
	return g.s.ListJobs(ctx, scope)
}

func (g *Guarded) GetJob(ctx context.Context, scope, id string) (core.Job, error) {
	if _, err := contract.AuthorizeTeam(ctx, "GetJob", scope); err != nil {
		return core.Job{}, err
	}
	return g.s.GetJob(ctx, scope, id)
}

func (g *Guarded) StopJob(ctx context.Context, scope, id string) (core.Job, error) {
	if _, err := contract.AuthorizeTeam(ctx, "StopJob", scope); err != nil {
		return core.Job{}, err
	}
	return g.s.StopJob(ctx, scope, id)
}

func (g *Guarded) JobLogs(ctx context.Context, scope, id string, instance int, offset int64, limit int) ([]byte, int64, error) {
	if _, err := contract.AuthorizeTeam(ctx, "JobLogs", scope); err != nil {
		return nil, 0, err
	}
	return g.s.JobLogs(ctx, scope, id, instance, offset, limit)
}

// Money.

func (g *Guarded) Quotas(ctx context.Context, scope, team string) ([]core.Quota, error) {
	if _, err := contract.AuthorizeTeam(ctx, "Quotas", scope); err != nil {
		return nil, err
	}
	return g.s.Quotas(ctx, scope, team)
}

func (g *Guarded) Ledger(ctx context.Context, scope, team string) (contract.LedgerView, error) {
	if _, err := contract.AuthorizeTeam(ctx, "Ledger", scope); err != nil {
		return contract.LedgerView{}, err
	}
	return g.s.Ledger(ctx, scope, team)
}

func (g *Guarded) Spend(ctx context.Context, scope, team string, from, to time.Time) (contract.SpendReport, error) {
	if _, err := contract.AuthorizeTeam(ctx, "Spend", scope); err != nil {
		return contract.SpendReport{}, err
	}
	return g.s.Spend(ctx, scope, team, from, to)
}

func (g *Guarded) PutQuota(ctx context.Context, q core.Quota) (core.Quota, error) {
	if _, err := contract.Authorize(ctx, "PutQuota"); err != nil {
		return core.Quota{}, err
	}
	return g.s.PutQuota(ctx, q)
}

func (g *Guarded) PutBudget(ctx context.Context, b core.Budget) (core.Budget, error) {
	if _, err := contract.Authorize(ctx, "PutBudget"); err != nil {
		return core.Budget{}, err
	}
	return g.s.PutBudget(ctx, b)
}

// Teams, users and credentials.

func (g *Guarded) Teams(ctx context.Context, scope string) ([]core.Team, error) {
	if _, err := contract.AuthorizeTeam(ctx, "Teams", scope); err != nil {
		return nil, err
	}
	return g.s.Teams(ctx, scope)
}

func (g *Guarded) Team(ctx context.Context, scope, id string) (core.Team, error) {
	if _, err := contract.AuthorizeTeam(ctx, "Team", scope); err != nil {
		return core.Team{}, err
	}
	return g.s.Team(ctx, scope, id)
}

func (g *Guarded) Users(ctx context.Context, scope string) ([]core.User, error) {
	if _, err := contract.AuthorizeTeam(ctx, "Users", scope); err != nil {
		return nil, err
	}
	return g.s.Users(ctx, scope)
}

func (g *Guarded) WhoAmI(ctx context.Context) (core.Principal, error) {
	return contract.Authorize(ctx, "WhoAmI")
}

func (g *Guarded) CreateToken(ctx context.Context, userID string, expiresIn time.Duration) (core.Token, string, error) {
	p, err := contract.Authorize(ctx, "CreateToken")
	if err != nil {
		return core.Token{}, "", err
	}
	return g.s.CreateToken(ctx, p, userID, expiresIn)
}

func (g *Guarded) Tokens(ctx context.Context) ([]core.Token, error) {
	p, err := contract.Authorize(ctx, "Tokens")
	if err != nil {
		return nil, err
	}
	return g.s.Tokens(ctx, p)
}

func (g *Guarded) RevokeToken(ctx context.Context, id string) (core.Token, error) {
	p, err := contract.Authorize(ctx, "RevokeToken")
	if err != nil {
		return core.Token{}, err
	}
	return g.s.RevokeToken(ctx, p, id)
}

func (g *Guarded) CreateAccessKey(ctx context.Context, userID string) (core.AccessKey, string, error) {
	p, err := contract.Authorize(ctx, "CreateAccessKey")
	if err != nil {
		return core.AccessKey{}, "", err
	}
	return g.s.CreateAccessKey(ctx, p, userID)
}

func (g *Guarded) AccessKeys(ctx context.Context) ([]core.AccessKey, error) {
	p, err := contract.Authorize(ctx, "AccessKeys")
	if err != nil {
		return nil, err
	}
	return g.s.AccessKeys(ctx, p)
}

func (g *Guarded) RevokeAccessKey(ctx context.Context, id string) (core.AccessKey, error) {
	p, err := contract.Authorize(ctx, "RevokeAccessKey")
	if err != nil {
		return core.AccessKey{}, err
	}
	return g.s.RevokeAccessKey(ctx, p, id)
}

// The operator's acts.

func (g *Guarded) FailNode(ctx context.Context, name, reason string) (contract.NodeReport, error) {
	if _, err := contract.Authorize(ctx, "FailNode"); err != nil {
		return contract.NodeReport{}, err
	}
	return g.s.FailNode(ctx, name, reason)
}

func (g *Guarded) RecoverNode(ctx context.Context, name string) (contract.NodeReport, error) {
	if _, err := contract.Authorize(ctx, "RecoverNode"); err != nil {
		return contract.NodeReport{}, err
	}
	return g.s.RecoverNode(ctx, name)
}

func (g *Guarded) CreateTeam(ctx context.Context, name string) (core.Team, error) {
	if _, err := contract.Authorize(ctx, "CreateTeam"); err != nil {
		return core.Team{}, err
	}
	return g.s.CreateTeam(ctx, name)
}

func (g *Guarded) CreateUser(ctx context.Context, name, team string, role core.Role) (core.User, error) {
	if _, err := contract.Authorize(ctx, "CreateUser"); err != nil {
		return core.User{}, err
	}
	return g.s.CreateUser(ctx, name, team, role)
}

func (g *Guarded) SetUserDisabled(ctx context.Context, id string, disabled bool) (core.User, error) {
	p, err := contract.Authorize(ctx, "SetUserDisabled")
	if err != nil {
		return core.User{}, err
	}
	return g.s.SetUserDisabled(ctx, p, id, disabled)
}

func (g *Guarded) SetTeamDisabled(ctx context.Context, id string, disabled bool) (core.Team, error) {
	p, err := contract.Authorize(ctx, "SetTeamDisabled")
	if err != nil {
		return core.Team{}, err
	}
	return g.s.SetTeamDisabled(ctx, p, id, disabled)
}

func (g *Guarded) Audit(ctx context.Context, after int64, limit int) ([]core.AuditRecord, error) {
	if _, err := contract.Authorize(ctx, "Audit"); err != nil {
		return nil, err
	}
	return g.s.Audit(ctx, after, limit)
}

// Sells reports whether node is one of the fleet's nodes, which admission
// keeps pods without a block off.
func (g *Guarded) Sells(node string) bool { return g.s.Sells(node) }
