package main

import (
	"context"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"capblock/internal/client"
	"capblock/internal/humantime"
)

// roles are the roles `users create --role` accepts (API.md).
var roles = []string{client.RoleAdmin, client.RoleMember, client.RoleViewer}

func (a *app) usersCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "users",
		Short: "List, create, disable and enable users",
		RunE:  groupRunE,
	}
	cmd.AddCommand(a.usersListCmd(), a.usersCreateCmd(), a.usersDisableCmd(true), a.usersDisableCmd(false))
	return cmd
}

func (a *app) usersListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List users: every user for an admin, one's team otherwise",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			users, err := c.Users(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(map[string]any{"users": users})
			}
			return a.printUsers(users)
		},
	}
}

func (a *app) printUsers(users []client.User) error {
	t := a.newTable("ID", "NAME", "TEAM", "ROLE", "CREATED (UTC)", "STATE").clipToFit("NAME", "TEAM")
	for _, u := range users {
		t.row(u.ID, u.Name, u.Team, u.Role, fmtTime(u.CreatedAt), enabledState(u.DisabledAt))
	}
	return t.flush()
}

func (a *app) usersCreateCmd() *cobra.Command {
	var team, role string
	cmd := &cobra.Command{
		Use:     "create NAME --team TEAM_ID --role admin|member|viewer",
		Short:   "Create a user in a team (admin)",
		Long:    "Create a user. An admin runs the fleet and every team; a member searches, buys,\ncancels and extends its team's blocks; a viewer reads its team's things.",
		Example: `  capblock users create ada --team team-… --role member`,
		Args:    exactlyOne("user name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(roles, role) {
				return usagef("--role %q: choose one of %v", role, roles)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if team, err = teamFlag(cmd.Context(), c, team); err != nil {
				return err
			}
			u, err := c.CreateUser(cmd.Context(), client.NewUser{Name: args[0], Team: team, Role: role})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(u)
			}
			if err := a.printUsers([]client.User{u}); err != nil {
				return err
			}
			a.note("give %s a token with: capblock tokens create --user %s", u.Name, u.ID)
			return nil
		},
	}
	cmd.Flags().StringVar(&team, "team", "", "the user's team: its id or name (from 'capblock teams list')")
	cmd.Flags().StringVar(&role, "role", "", "admin, member or viewer")
	_ = cmd.MarkFlagRequired("team")
	_ = cmd.MarkFlagRequired("role")
	return cmd
}

func (a *app) tokensCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tokens",
		Short: "Create, list and revoke API tokens",
		RunE:  groupRunE,
	}
	cmd.AddCommand(a.tokensCreateCmd(), a.tokensListCmd(), a.tokensRevokeCmd())
	return cmd
}

func (a *app) tokensCreateCmd() *cobra.Command {
	var user, expiresIn string
	cmd := &cobra.Command{
		Use:   "create [--user USER_ID] [--expires-in D]",
		Short: "Create an API token, for yourself or (admin) another user; it is shown once",
		Example: `  capblock tokens create --expires-in 30d
  capblock tokens create --user usr-… --expires-in 720h`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var lifetime time.Duration
			if expiresIn != "" {
				var err error
				if lifetime, err = humantime.ParseDuration(expiresIn); err != nil {
					return usageError(fmt.Errorf("--expires-in: %w", err))
				}
				if lifetime < time.Minute {
					return usagef("--expires-in %s: a token lives at least a minute", expiresIn)
				}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if user == "" {
				user, err = a.ownUserID(cmd.Context(), c)
			} else {
				user, err = userID(cmd.Context(), c, user)
			}
			if err != nil {
				return err
			}
			tok, err := c.CreateToken(cmd.Context(), user, lifetime)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				if err := a.printJSON(tok); err != nil {
					return err
				}
			} else {
				t := &table{w: tabwriter.NewWriter(a.stdout, 0, 8, 1, ' ', 0)}
				t.row("token:", tok.Secret)
				t.row("id:", tok.ID)
				t.row("user:", tok.User)
				t.row("expires:", fmtExpiry(tok.ExpiresAt))
				if err := t.flush(); err != nil {
					return err
				}
			}
			a.note("this token is shown only now and cannot be shown again: store it (e.g. in a file for 'capblock login --token-file FILE'); revoke it with 'capblock tokens revoke %s'", tok.ID)
			return nil
		},
	}
	cmd.Flags().StringVar(&user, "user", "", "the user the token acts as, by id or name (default: yourself, as 'capblock login' found out)")
	cmd.Flags().StringVar(&expiresIn, "expires-in", "", "lifetime, e.g. 720h or 30d (default: no expiry)")
	return cmd
}

// ownUserID is the id of the user whose token the command uses: the one
// the stored login found, else found out from the server.
func (a *app) ownUserID(ctx context.Context, c *client.Client) (string, error) {
	if a.creds != nil && a.creds.user != "" {
		return a.creds.user, nil
	}
	me, _, err := c.Whoami(ctx)
	if err != nil {
		return "", err
	}
	return me.ID, nil
}

func fmtExpiry(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return fmtZoned(*t)
}

func (a *app) tokensListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List tokens (never their secrets): every token for an admin, one's own otherwise",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			tokens, err := c.Tokens(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(map[string]any{"tokens": tokens})
			}
			return a.printTokens(tokens)
		},
	}
}

func (a *app) printTokens(tokens []client.Token) error {
	t := a.newTable("ID", "USER", "STATE", "CREATED (UTC)", "EXPIRES (UTC)").clipToFit("USER")
	for _, tok := range tokens {
		state := "active"
		switch {
		case tok.RevokedAt != nil:
			state = "revoked " + fmtTime(*tok.RevokedAt)
		case !live(tok, a.now()):
			state = "expired"
		}
		expires := "never"
		if tok.ExpiresAt != nil {
			expires = fmtTime(*tok.ExpiresAt)
		}
		t.row(tok.ID, tok.User, state, fmtTime(tok.CreatedAt), expires)
	}
	return t.flush()
}

func (a *app) tokensRevokeCmd() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "revoke TOKEN_ID [--yes]",
		Short: "Revoke a token at once: yours, or (admin) anyone's",
		Long: `Revoke a token at once: yours, or (admin) anyone's. It first says which
token and asks for confirmation (--yes does not ask; without a terminal to
answer, --yes is needed).`,
		Args: exactlyOne("token id (from 'capblock tokens list')"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.mayAsk(yes, "revoke"); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			what := fmt.Sprintf("revoking token %s: requests with it are refused from now on", args[0])
			if list, err := c.Tokens(cmd.Context()); err == nil {
				for _, tok := range list {
					if tok.ID == args[0] {
						what = fmt.Sprintf("revoking token %s of user %s, created %s: requests with it are refused from now on",
							tok.ID, tok.User, fmtTime(tok.CreatedAt))
					}
				}
			}
			if err := a.confirm(yes, what, "Revoke it?", "token "+args[0]+" was not revoked"); err != nil {
				return err
			}
			tok, err := c.RevokeToken(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(tok)
			}
			return a.printTokens([]client.Token{tok})
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "revoke without asking")
	return cmd
}
