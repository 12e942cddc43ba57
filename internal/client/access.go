package client

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// CreateTeam makes a team (admin): POST /v1/teams.
func (c *Client) CreateTeam(ctx context.Context, name string) (Team, error) {
	var t Team
	body := map[string]string{"name": name}
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/teams", body: body}, &t); err != nil {
		return Team{}, wrapf(err, "creating team %s", name)
	}
	return t, nil
}

// Teams lists every team for an admin, one's own otherwise: GET /v1/teams.
func (c *Client) Teams(ctx context.Context) ([]Team, error) {
	var out struct {
		Teams []Team `json:"teams"`
	}
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/teams"}, &out); err != nil {
		return nil, wrapf(err, "listing teams")
	}
	return out.Teams, nil
}

// Team fetches one team: GET /v1/teams/{id}.
func (c *Client) Team(ctx context.Context, id string) (Team, error) {
	var t Team
	if err := c.do(ctx, request{method: http.MethodGet, path: teamPath(id, "")}, &t); err != nil {
		return Team{}, wrapf(err, "getting team %s", id)
	}
	return t, nil
}

// PutQuota sets one of a team's quota rows (admin): PUT
// /v1/teams/{id}/quotas. The row replaces the one of the same instance type.
func (c *Client) PutQuota(ctx context.Context, teamID string, q Quota) (Quota, error) {
	var out Quota
	if err := c.do(ctx, request{method: http.MethodPut, path: teamPath(teamID, "/quotas"), body: q}, &out); err != nil {
		return Quota{}, wrapf(err, "setting the quota of team %s", teamID)
	}
	return out, nil
}

// Quotas lists a team's quota rows: GET /v1/teams/{id}/quotas.
func (c *Client) Quotas(ctx context.Context, teamID string) ([]Quota, error) {
	var out struct {
		Quotas []Quota `json:"quotas"`
	}
	if err := c.do(ctx, request{method: http.MethodGet, path: teamPath(teamID, "/quotas")}, &out); err != nil {
		return nil, wrapf(err, "getting the quotas of team %s", teamID)
	}
	return out.Quotas, nil
}

// PutBudget sets a team's budget (admin): PUT /v1/teams/{id}/budget.
func (c *Client) PutBudget(ctx context.Context, teamID string, b Budget) (Budget, error) {
	var out Budget
	if err := c.do(ctx, request{method: http.MethodPut, path: teamPath(teamID, "/budget"), body: b}, &out); err != nil {
		return Budget{}, wrapf(err, "setting the budget of team %s", teamID)
	}
	return out, nil
}

// Ledger fetches a team's charges and refunds, spend and budget:
// GET /v1/teams/{id}/ledger.
func (c *Client) Ledger(ctx context.Context, teamID string) (Ledger, error) {
	var l Ledger
	if err := c.do(ctx, request{method: http.MethodGet, path: teamPath(teamID, "/ledger")}, &l); err != nil {
		return Ledger{}, wrapf(err, "getting the ledger of team %s", teamID)
	}
	return l, nil
}

// CreateUser makes a user in a team with a role (admin): POST /v1/users.
func (c *Client) CreateUser(ctx context.Context, u NewUser) (User, error) {
	var out User
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/users", body: u}, &out); err != nil {
		return User{}, wrapf(err, "creating user %s", u.Name)
	}
	return out, nil
}

// Users lists every user for an admin, one's team otherwise: GET /v1/users.
func (c *Client) Users(ctx context.Context) ([]User, error) {
	var out struct {
		Users []User `json:"users"`
	}
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/users"}, &out); err != nil {
		return nil, wrapf(err, "listing users")
	}
	return out.Users, nil
}

// Whoami returns the user the client's token belongs to, and the
// token's id: GET /v1/whoami.
func (c *Client) Whoami(ctx context.Context) (User, string, error) {
	var out struct {
		User    User   `json:"user"`
		TokenID string `json:"tokenId"`
	}
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/whoami"}, &out); err != nil {
		return User{}, "", wrapf(err, "asking whose token this is")
	}
	return out.User, out.TokenID, nil
}

// CreateToken makes an API token for a user, valid for expiresIn (0: no
// expiry): POST /v1/users/{id}/tokens. The answer holds the secret, which
// the server never shows again.
func (c *Client) CreateToken(ctx context.Context, userID string, expiresIn time.Duration) (NewToken, error) {
	body := map[string]string{}
	if expiresIn > 0 {
		body["expiresIn"] = expiresIn.String()
	}
	var out NewToken
	path := "/v1/users/" + url.PathEscape(userID) + "/tokens"
	if err := c.do(ctx, request{method: http.MethodPost, path: path, body: body}, &out); err != nil {
		return NewToken{}, wrapf(err, "creating a token for user %s", userID)
	}
	return out, nil
}

// Tokens lists every token for an admin, one's own otherwise: GET /v1/tokens.
func (c *Client) Tokens(ctx context.Context) ([]Token, error) {
	var out struct {
		Tokens []Token `json:"tokens"`
	}
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/tokens"}, &out); err != nil {
		return nil, wrapf(err, "listing tokens")
	}
	return out.Tokens, nil
}

// RevokeToken revokes a token at once: DELETE /v1/tokens/{id}.
func (c *Client) RevokeToken(ctx context.Context, id string) (Token, error) {
	var t Token
	if err := c.do(ctx, request{method: http.MethodDelete, path: "/v1/tokens/" + url.PathEscape(id)}, &t); err != nil {
		return Token{}, wrapf(err, "revoking token %s", id)
	}
	return t, nil
}

// Audit returns the audit records after the cursor ("" = from the start),
// for admins: GET /v1/audit.
func (c *Client) Audit(ctx context.Context, after string) (AuditPage, error) {
	v := url.Values{}
	if after != "" {
		v.Set("after", after)
	}
	var page AuditPage
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/audit", query: v}, &page); err != nil {
		return AuditPage{}, wrapf(err, "reading the audit log")
	}
	return page, nil
}

// Spend returns spend against on-demand prices per team, instance type and
// month: GET /v1/spend.
func (c *Client) Spend(ctx context.Context, q SpendQuery) (Spend, error) {
	v := url.Values{}
	for key, val := range map[string]string{"team": q.Team, "from": q.From, "to": q.To} {
		if val != "" {
			v.Set(key, val)
		}
	}
	var s Spend
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/spend", query: v}, &s); err != nil {
		return Spend{}, wrapf(err, "reading spend")
	}
	return s, nil
}

func teamPath(id, suffix string) string { return "/v1/teams/" + url.PathEscape(id) + suffix }

// SetUserDisabled disables a user, or enables it again (admin):
// POST /v1/users/{id}/disable or /enable.
func (c *Client) SetUserDisabled(ctx context.Context, id string, disabled bool) (User, error) {
	var u User
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/users/" + url.PathEscape(id) + "/" + disableVerb(disabled)}, &u); err != nil {
		return User{}, wrapf(err, "%s user %s", strings.TrimSuffix(disableVerb(disabled), "e")+"ing", id)
	}
	return u, nil
}

// SetTeamDisabled disables a team, or enables it again (admin):
// POST /v1/teams/{id}/disable or /enable.
func (c *Client) SetTeamDisabled(ctx context.Context, id string, disabled bool) (Team, error) {
	var t Team
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/teams/" + url.PathEscape(id) + "/" + disableVerb(disabled)}, &t); err != nil {
		return Team{}, wrapf(err, "%s team %s", strings.TrimSuffix(disableVerb(disabled), "e")+"ing", id)
	}
	return t, nil
}

func disableVerb(disabled bool) string {
	if disabled {
		return "disable"
	}
	return "enable"
}
