package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"capblock/internal/auth"
	"capblock/internal/client"
)

func (a *app) loginCmd() *cobra.Command {
	var (
		tokenFile string
		wait      time.Duration
	)
	cmd := &cobra.Command{
		Use:   "login --url URL (--token-file FILE | --token TOKEN)",
		Short: "Check an API token against a server and store both for the other commands",
		Long: `Check an API token against the server and store the server's address and the
token in $XDG_CONFIG_HOME/capblock/config.json (~/.config/capblock/config.json),
readable only by you. The other commands use them unless --url/--token or
CAPBLOCK_URL/CAPBLOCK_TOKEN say otherwise; the stored token is only sent to
the server it was stored for.

On its first start, "capblock serve" writes the first administrator's token
to admin.token beside its database, once it listens. With --wait, login
waits that long for a server that is starting: for the token file to
appear and for the server to answer.`,
		Example: `  capblock login --url http://127.0.0.1:8080 --token-file admin.token
  capblock login --url https://capblock.example.com --token-file ~/capblock.token
  capblock serve & capblock login --token-file admin.token --wait 30s`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if wait < 0 {
				return usagef("--wait %s: want a duration of 0 or more, e.g. 30s", wait)
			}
			url := a.url
			if url == "" {
				url = a.getenv("CAPBLOCK_URL")
			}
			if url == "" {
				url = defaultURL
			}
			deadline := time.Now().Add(wait)
			for {
				err := a.tryLogin(cmd.Context(), url, tokenFile)
				if !startingServer(err) || time.Now().After(deadline) {
					return err
				}
				select {
				case <-cmd.Context().Done():
					return err
				case <-time.After(loginRetryGap):
				}
			}
		},
	}
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "read the token from this file, e.g. admin.token beside the server's database")
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait up to this long for a starting server: for the token file and for its answer")
	return cmd
}

// loginRetryGap is how often login --wait tries again.
const loginRetryGap = 200 * time.Millisecond

// tryLogin reads the token and logs in to the server at url with it.
func (a *app) tryLogin(ctx context.Context, url, tokenFile string) error {
	token, source, err := a.loginToken(tokenFile)
	if err != nil {
		return err
	}
	c, err := a.newClient(url, token)
	if err != nil {
		return err
	}
	return a.login(ctx, c, token, source)
}

// startingServer reports whether err is what a server that is still
// starting causes: no token file yet, or no answer yet.
func startingServer(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, client.ErrUnreachable)
}

// loginToken reads the token that login checks, and says where it came
// from without showing it.
func (a *app) loginToken(tokenFile string) (token, source string, err error) {
	switch {
	case tokenFile != "" && a.token != "":
		return "", "", usagef("give --token-file or --token, not both")
	case tokenFile == "" && a.token == "":
		return "", "", usagef("give --token-file FILE (the first administrator's is admin.token beside the server's database) or --token TOKEN")
	case a.token != "":
		token, source = a.token, "--token"
	default:
		data, err := os.ReadFile(tokenFile)
		if err != nil {
			return "", "", fmt.Errorf("reading the token: %w", err)
		}
		token, source = strings.TrimSpace(string(data)), tokenFile
	}
	if err := auth.Check(token); err != nil {
		return "", "", usagef("%s does not hold a capblock API token (%s followed by 43 characters)", source, auth.Prefix)
	}
	return token, source, nil
}

// login checks the token with GET /v1/users, finds out whose it is and
// stores the credentials.
func (a *app) login(ctx context.Context, c *client.Client, token, source string) error {
	me, _, err := c.Whoami(ctx)
	var p *client.Problem
	if errors.As(err, &p) && p.Code == client.CodeUnauthenticated {
		detail := p.Detail
		if detail == "" {
			detail = "the token is not valid"
		}
		return fmt.Errorf("the server at %s refused the token from %s: %s", c.BaseURL(), source, detail)
	}
	if err != nil {
		return fmt.Errorf("checking the token: %w", err)
	}
	path, err := a.saveConfig(config{URL: c.BaseURL(), Token: token, User: me.ID})
	if err != nil {
		return err
	}
	if a.jsonOutput() {
		return a.printJSON(map[string]any{"url": c.BaseURL(), "config": path, "user": me})
	}
	team := me.Team
	if t, err := c.Team(ctx, me.Team); err == nil && t.Name != "" {
		team = t.Name + " (" + t.ID + ")"
	}
	a.printLine("logged in to %s as %s (%s) of team %s", c.BaseURL(), me.Name, me.Role, team)
	a.note("stored in %s", path)
	return nil
}

// live reports whether a token is neither revoked nor expired at now.
func live(t client.Token, now time.Time) bool {
	return t.RevokedAt == nil && (t.ExpiresAt == nil || t.ExpiresAt.After(now))
}

func (a *app) logoutCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Forget the stored server and token",
		Long: `Remove the file where "capblock login" stored the server and the token. The
token itself stays valid: revoke it with "capblock tokens revoke TOKEN_ID"
if it should not be used again.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, path, ok, loadErr := a.loadConfig()
			if path == "" {
				return loadErr
			}
			err := os.Remove(path)
			if errors.Is(err, os.ErrNotExist) {
				a.note("not logged in (there is no %s)", path)
				return nil
			}
			if err != nil {
				return fmt.Errorf("logging out: %w", err)
			}
			if ok {
				a.printLine("logged out of %s", cfg.URL)
			} else {
				a.printLine("logged out: removed %s", path)
			}
			return nil
		},
	}
}
