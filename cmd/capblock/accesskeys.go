package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"capblock/internal/client"
)

func (a *app) accessKeysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "access-keys",
		Short: "Create, list and revoke access keys for the AWS protocols (SDKs, the aws CLI)",
		Long: `Create, list and revoke AWS-style access keys.

An access key lets code written for AWS (boto3, the aws CLI, the AWS SDKs)
call this server's AWS endpoint, <server>/aws, signing its requests as it
would for AWS: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and the
endpoint. A key acts as its user, with the user's role and team. Access
keys follow the rules of tokens: anyone makes and revokes their own, an
admin anyone's.`,
		RunE: groupRunE,
	}
	cmd.AddCommand(a.accessKeysCreateCmd(), a.accessKeysListCmd(), a.accessKeysRevokeCmd())
	return cmd
}

func (a *app) accessKeysCreateCmd() *cobra.Command {
	var user string
	cmd := &cobra.Command{
		Use:   "create [--user USER]",
		Short: "Create an access key, for yourself or (admin) another user; its secret is shown once",
		Example: `  capblock access-keys create
  capblock access-keys create --user ada`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
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
			k, err := c.CreateAccessKey(cmd.Context(), user)
			if err != nil {
				return err
			}
			endpoint := strings.TrimSuffix(a.creds.url, "/") + "/aws"
			if a.jsonOutput() {
				if err := a.printJSON(struct {
					client.NewAccessKey
					Endpoint string `json:"endpoint"`
				}{k, endpoint}); err != nil {
					return err
				}
			} else {
				t := &table{w: tabwriter.NewWriter(a.stdout, 0, 8, 1, ' ', 0)}
				t.row("id:", k.ID)
				t.row("access key id:", k.AccessKeyID)
				t.row("secret access key:", k.SecretAccessKey)
				t.row("user:", k.User)
				t.row("endpoint:", endpoint)
				if err := t.flush(); err != nil {
					return err
				}
				a.printLine("")
				a.printLine("export AWS_ACCESS_KEY_ID=%s", k.AccessKeyID)
				a.printLine("export AWS_SECRET_ACCESS_KEY=%s", k.SecretAccessKey)
			}
			a.note("the secret access key is shown only now and cannot be shown again; point AWS clients at %s (AWS_ENDPOINT_URL or --endpoint-url); revoke the key with 'capblock access-keys revoke %s'",
				endpoint, k.ID)
			return nil
		},
	}
	cmd.Flags().StringVar(&user, "user", "", "the user the key acts as, by id or name (default: yourself, as 'capblock login' found out)")
	return cmd
}

func (a *app) accessKeysListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List access keys (never their secrets): every key for an admin, one's own otherwise",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			keys, err := c.AccessKeys(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(map[string]any{"accessKeys": keys})
			}
			return a.printAccessKeys(cmd.Context(), c, keys)
		},
	}
}

// printAccessKeys shows keys with their users' and teams' names, where
// the caller may list them.
func (a *app) printAccessKeys(ctx context.Context, c *client.Client, keys []client.AccessKey) error {
	users, teams := userNames(ctx, c), teamNames(ctx, c)
	t := a.newTable("ID", "ACCESS KEY ID", "USER", "TEAM", "CREATED (UTC)", "STATE").clipToFit("USER", "TEAM")
	for _, k := range keys {
		state := "active"
		if k.RevokedAt != nil {
			state = "revoked"
		}
		t.row(k.ID, k.AccessKeyID, nameOf(users, k.User), nameOf(teams, k.Team), fmtTime(k.CreatedAt), state)
	}
	return t.flush()
}

func (a *app) accessKeysRevokeCmd() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "revoke ID [--yes]",
		Short: "Revoke an access key at once, by its id or access key id: yours, or (admin) anyone's",
		Long: `Revoke an access key at once, by its id or access key id: yours, or (admin)
anyone's. It first says which key and asks for confirmation (--yes does
not ask; without a terminal to answer, --yes is needed).`,
		Args: exactlyOne("access key id (from 'capblock access-keys list')"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.mayAsk(yes, "revoke"); err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := a.client()
			if err != nil {
				return err
			}
			what := fmt.Sprintf("revoking access key %s: requests signed with it are refused from now on", args[0])
			if keys, err := c.AccessKeys(ctx); err == nil {
				for _, k := range keys {
					if k.ID == args[0] || k.AccessKeyID == args[0] {
						what = fmt.Sprintf("revoking access key %s (%s) of user %s, created %s: requests signed with it are refused from now on",
							k.ID, k.AccessKeyID, k.User, fmtTime(k.CreatedAt))
					}
				}
			}
			if err := a.confirm(yes, what, "Revoke it?", "access key "+args[0]+" was not revoked"); err != nil {
				return err
			}
			k, err := c.RevokeAccessKey(ctx, args[0])
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(k)
			}
			return a.printAccessKeys(ctx, c, []client.AccessKey{k})
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "revoke without asking")
	return cmd
}
