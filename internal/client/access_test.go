package client

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func usd(amount string) Money { return Money{Amount: amount, Currency: "USD"} }

func TestAccessCalls(t *testing.T) {
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	expires := created.Add(720 * time.Hour)
	tests := map[string]struct {
		body     string
		call     func(context.Context, *Client) (any, error)
		want     any
		wantSeen seen
	}{
		"create team": {
			body:     `{"id": "team-1", "name": "research", "createdAt": "2026-11-01T00:00:00Z"}`,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.CreateTeam(ctx, "research") },
			want:     Team{ID: "team-1", Name: "research", CreatedAt: created},
			wantSeen: seen{Method: "POST", Path: "/v1/teams", Body: `{"name":"research"}`},
		},
		"teams": {
			body:     `{"teams": [{"id": "team-1", "name": "research", "createdAt": "2026-11-01T00:00:00Z"}]}`,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.Teams(ctx) },
			want:     []Team{{ID: "team-1", Name: "research", CreatedAt: created}},
			wantSeen: seen{Method: "GET", Path: "/v1/teams"},
		},
		"team id is escaped": {
			body:     `{"id": "team-1", "name": "research", "createdAt": "2026-11-01T00:00:00Z"}`,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.Team(ctx, "a/b") },
			want:     Team{ID: "team-1", Name: "research", CreatedAt: created},
			wantSeen: seen{Method: "GET", Path: "/v1/teams/a%2Fb"},
		},
		"put quota": {
			body: `{"instanceType": "h100.8x", "maxInstancesPerBlock": 4, "maxInstancesHeld": 8, "maxDurationHours": 72, "maxLeadDays": 28}`,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.PutQuota(ctx, "team-1", Quota{InstanceType: "h100.8x", MaxInstancesPerBlock: 4, MaxInstancesHeld: 8, MaxDurationHours: 72, MaxLeadDays: 28})
			},
			want: Quota{InstanceType: "h100.8x", MaxInstancesPerBlock: 4, MaxInstancesHeld: 8, MaxDurationHours: 72, MaxLeadDays: 28},
			wantSeen: seen{Method: "PUT", Path: "/v1/teams/team-1/quotas",
				Body: `{"instanceType":"h100.8x","maxInstancesPerBlock":4,"maxInstancesHeld":8,"maxDurationHours":72,"maxLeadDays":28}`},
		},
		"quotas": {
			body:     `{"quotas": [{"maxInstancesPerBlock": 64, "maxInstancesHeld": 256, "maxDurationHours": 0, "maxLeadDays": 0}]}`,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.Quotas(ctx, "team-1") },
			want:     []Quota{{MaxInstancesPerBlock: 64, MaxInstancesHeld: 256}},
			wantSeen: seen{Method: "GET", Path: "/v1/teams/team-1/quotas"},
		},
		"put budget": {
			body: `{"amount": {"amount": "1000.00", "currency": "USD"}, "period": "month"}`,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.PutBudget(ctx, "team-1", Budget{Amount: usd("1000.00"), Period: "month"})
			},
			want:     Budget{Amount: usd("1000.00"), Period: "month"},
			wantSeen: seen{Method: "PUT", Path: "/v1/teams/team-1/budget", Body: `{"amount":{"amount":"1000.00","currency":"USD"},"period":"month"}`},
		},
		"ledger": {
			body: `{"entries": [{"id": "led-1", "time": "2026-11-01T00:00:00Z", "kind": "charge", "amount": {"amount": "3.00", "currency": "USD"}, "subject": "cb-2"}],
				"spent": {"amount": "3.00", "currency": "USD"}, "budget": {"amount": {"amount": "1000.00", "currency": "USD"}, "period": "month"}}`,
			call: func(ctx context.Context, c *Client) (any, error) { return c.Ledger(ctx, "team-1") },
			want: Ledger{
				Entries: []LedgerEntry{{ID: "led-1", Time: created, Kind: "charge", Amount: usd("3.00"), Subject: "cb-2"}},
				Spent:   usd("3.00"), Budget: &Budget{Amount: usd("1000.00"), Period: "month"},
			},
			wantSeen: seen{Method: "GET", Path: "/v1/teams/team-1/ledger"},
		},
		"create user": {
			body: `{"id": "usr-2", "name": "ada", "team": "team-1", "role": "member", "createdAt": "2026-11-01T00:00:00Z"}`,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateUser(ctx, NewUser{Name: "ada", Team: "team-1", Role: RoleMember})
			},
			want:     User{ID: "usr-2", Name: "ada", Team: "team-1", Role: "member", CreatedAt: created},
			wantSeen: seen{Method: "POST", Path: "/v1/users", Body: `{"name":"ada","team":"team-1","role":"member"}`},
		},
		"users": {
			body:     `{"users": [{"id": "usr-1", "name": "admin", "team": "team-0", "role": "admin", "createdAt": "2026-11-01T00:00:00Z"}]}`,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.Users(ctx) },
			want:     []User{{ID: "usr-1", Name: "admin", Team: "team-0", Role: "admin", CreatedAt: created}},
			wantSeen: seen{Method: "GET", Path: "/v1/users"},
		},
		"create token": {
			body:     `{"id": "tok-2", "user": "usr-2", "createdAt": "2026-11-01T00:00:00Z", "expiresAt": "2026-12-01T00:00:00Z", "token": "cbt_secret"}`,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.CreateToken(ctx, "usr-2", 720*time.Hour) },
			want:     NewToken{Token: Token{ID: "tok-2", User: "usr-2", CreatedAt: created, ExpiresAt: &expires}, Secret: "cbt_secret"},
			wantSeen: seen{Method: "POST", Path: "/v1/users/usr-2/tokens", Body: `{"expiresIn":"720h0m0s"}`},
		},
		"create token without expiry": {
			body:     `{"id": "tok-3", "user": "usr-2", "createdAt": "2026-11-01T00:00:00Z", "token": "cbt_secret"}`,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.CreateToken(ctx, "usr-2", 0) },
			want:     NewToken{Token: Token{ID: "tok-3", User: "usr-2", CreatedAt: created}, Secret: "cbt_secret"},
			wantSeen: seen{Method: "POST", Path: "/v1/users/usr-2/tokens", Body: `{}`},
		},
		"tokens": {
			body:     `{"tokens": [{"id": "tok-1", "user": "usr-1", "createdAt": "2026-11-01T00:00:00Z", "revokedAt": "2026-12-01T00:00:00Z"}]}`,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.Tokens(ctx) },
			want:     []Token{{ID: "tok-1", User: "usr-1", CreatedAt: created, RevokedAt: &expires}},
			wantSeen: seen{Method: "GET", Path: "/v1/tokens"},
		},
		"revoke token": {
			body:     `{"id": "tok-1", "user": "usr-1", "createdAt": "2026-11-01T00:00:00Z", "revokedAt": "2026-12-01T00:00:00Z"}`,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.RevokeToken(ctx, "tok-1") },
			want:     Token{ID: "tok-1", User: "usr-1", CreatedAt: created, RevokedAt: &expires},
			wantSeen: seen{Method: "DELETE", Path: "/v1/tokens/tok-1"},
		},
		"create access key": {
			body: `{"id": "ak-1", "accessKeyId": "AKIAABCDEFGHIJKLMNOP", "user": "usr-2", "team": "team-1",
				"createdAt": "2026-11-01T00:00:00Z", "secretAccessKey": "s3cr3t"}`,
			call: func(ctx context.Context, c *Client) (any, error) { return c.CreateAccessKey(ctx, "usr-2") },
			want: NewAccessKey{AccessKey: AccessKey{ID: "ak-1", AccessKeyID: "AKIAABCDEFGHIJKLMNOP", User: "usr-2", Team: "team-1", CreatedAt: created},
				SecretAccessKey: "s3cr3t"},
			wantSeen: seen{Method: "POST", Path: "/v1/users/usr-2/access-keys"},
		},
		"access keys": {
			body: `{"accessKeys": [{"id": "ak-1", "accessKeyId": "AKIAABCDEFGHIJKLMNOP", "user": "usr-1", "team": "team-1",
				"createdAt": "2026-11-01T00:00:00Z", "revokedAt": "2026-12-01T00:00:00Z"}]}`,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.AccessKeys(ctx) },
			want:     []AccessKey{{ID: "ak-1", AccessKeyID: "AKIAABCDEFGHIJKLMNOP", User: "usr-1", Team: "team-1", CreatedAt: created, RevokedAt: &expires}},
			wantSeen: seen{Method: "GET", Path: "/v1/access-keys"},
		},
		"revoke access key": {
			body:     `{"id": "ak-1", "accessKeyId": "AKIAABCDEFGHIJKLMNOP", "user": "usr-1", "team": "team-1", "createdAt": "2026-11-01T00:00:00Z", "revokedAt": "2026-12-01T00:00:00Z"}`,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.RevokeAccessKey(ctx, "ak-1") },
			want:     AccessKey{ID: "ak-1", AccessKeyID: "AKIAABCDEFGHIJKLMNOP", User: "usr-1", Team: "team-1", CreatedAt: created, RevokedAt: &expires},
			wantSeen: seen{Method: "DELETE", Path: "/v1/access-keys/ak-1"},
		},
		"audit": {
			body: `{"records": [{"seq": 7, "time": "2026-11-01T00:00:00Z", "user": "usr-1", "team": "team-0", "tokenId": "tok-1",
				"method": "POST", "route": "/v1/teams", "status": 201, "outcome": "ok"}], "next": "7"}`,
			call: func(ctx context.Context, c *Client) (any, error) { return c.Audit(ctx, "6") },
			want: AuditPage{Records: []AuditRecord{{Seq: 7, Time: created, User: "usr-1", Team: "team-0", TokenID: "tok-1",
				Method: "POST", Route: "/v1/teams", Status: 201, Outcome: "ok"}}, Next: "7"},
			wantSeen: seen{Method: "GET", Path: "/v1/audit", Query: "after=6"},
		},
		"spend": {
			body: `{"rows": [{"team": "team-1", "instanceType": "h100.8x", "month": "2026-12", "spent": {"amount": "75.00", "currency": "USD"},
				"onDemand": {"amount": "100.00", "currency": "USD"}, "savings": {"amount": "25.00", "currency": "USD"}}],
				"total": {"spent": {"amount": "75.00", "currency": "USD"}, "onDemand": {"amount": "100.00", "currency": "USD"}, "savings": {"amount": "25.00", "currency": "USD"}}}`,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.Spend(ctx, SpendQuery{Team: "team-1", From: "2026-11", To: "2026-12"})
			},
			want: Spend{
				Rows:  []SpendRow{{Team: "team-1", InstanceType: "h100.8x", Month: "2026-12", Spent: usd("75.00"), OnDemand: usd("100.00"), Savings: usd("25.00")}},
				Total: SpendTotal{Spent: usd("75.00"), OnDemand: usd("100.00"), Savings: usd("25.00")},
			},
			wantSeen: seen{Method: "GET", Path: "/v1/spend", Query: "from=2026-11&team=team-1&to=2026-12"},
		},
		"buy for another team": {
			body: blockJSON,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.Buy(ctx, BuyRequest{OfferingID: "cbo-abc", ClientToken: "ct-1", Team: "team-2"})
			},
			want:     wantBlock,
			wantSeen: seen{Method: "POST", Path: "/v1/blocks", Body: `{"offeringId":"cbo-abc","clientToken":"ct-1","team":"team-2"}`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, got := fakeAPI(t, http.StatusOK, tc.body)
			v, err := tc.call(t.Context(), c)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if diff := cmp.Diff(tc.want, v); diff != "" {
				t.Errorf("decoded mismatch (-want +got):\n%s", diff)
			}
			tc.wantSeen.Auth = "Bearer tok"
			if diff := cmp.Diff(tc.wantSeen, *got); diff != "" {
				t.Errorf("request mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
