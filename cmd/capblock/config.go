package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"capblock/internal/client"
)

// config is what `capblock login` stores in
// $XDG_CONFIG_HOME/capblock/config.json (mode 0600): the server, a token
// for it and, when login could tell, the id of the token's user.
type config struct {
	URL   string `json:"url"`
	Token string `json:"token"`
	User  string `json:"user,omitempty"`
}

// configPath is where login stores the credentials.
func (a *app) configPath() (string, error) {
	dir, err := a.configDir()
	if err != nil {
		return "", fmt.Errorf("finding the configuration directory: %w", err)
	}
	return filepath.Join(dir, "capblock", "config.json"), nil
}

// loadConfig reads the stored credentials; ok is false when there are none.
func (a *app) loadConfig() (cfg config, path string, ok bool, err error) {
	path, err = a.configPath()
	if err != nil {
		return config{}, "", false, err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return config{}, path, false, nil
	}
	if err != nil {
		return config{}, path, false, fmt.Errorf("reading %s: %w", path, err)
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return config{}, path, false, fmt.Errorf("reading %s: %w; log in again with 'capblock login' or remove the file", path, err)
	}
	return cfg, path, true, nil
}

// saveConfig writes cfg readable by its owner only (writePrivateFile).
func (a *app) saveConfig(cfg config) (string, error) {
	path, err := a.configPath()
	if err != nil {
		return "", err
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encoding the configuration: %w", err)
	}
	if err := writePrivateFile(path, append(data, '\n')); err != nil {
		return "", err
	}
	return path, nil
}

// writePrivateFile writes data to path readable by its owner only
// (directory 0700, file 0600), replacing the old file at once so that no
// reader sees half a file.
func writePrivateFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("restricting %s to its owner: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*") // mode 0600
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(f.Name()) // after a successful rename, there is nothing left to remove
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("restricting %s to its owner: %w", f.Name(), err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", f.Name(), err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// credentials are the server and token a command uses, and where the token
// came from, for messages that must never show the token itself.
type credentials struct {
	url         string
	token       string
	tokenSource string // "--token", "CAPBLOCK_TOKEN" or "the login in PATH"; "" without a token
	// user is the token's user id when the token is the stored login's.
	user string
	// otherLogin is the server of a stored login whose token was not used
	// because the command talks to another server.
	otherLogin string
}

// resolveCredentials applies the precedence flag > environment > stored
// login > default, to the URL and to the token. The stored token is only
// sent to the server it was stored for.
func (a *app) resolveCredentials() (credentials, error) {
	cr := credentials{url: a.url, token: a.token, tokenSource: "--token"}
	if cr.url == "" {
		cr.url = a.getenv("CAPBLOCK_URL")
	}
	if cr.token == "" {
		cr.token, cr.tokenSource = a.getenv("CAPBLOCK_TOKEN"), "CAPBLOCK_TOKEN"
	}
	if cr.url != "" && cr.token != "" {
		return cr, nil
	}
	cfg, path, ok, err := a.loadConfig()
	if err != nil {
		return credentials{}, err
	}
	if cr.url == "" && ok && cfg.URL != "" {
		cr.url = cfg.URL
	}
	if cr.url == "" {
		cr.url = defaultURL
	}
	switch {
	case cr.token != "":
	case ok && cfg.Token != "" && sameServer(cfg.URL, cr.url):
		cr.token, cr.tokenSource, cr.user = cfg.Token, "the login in "+path, cfg.User
	default:
		cr.tokenSource = ""
		if ok && cfg.Token != "" {
			cr.otherLogin = cfg.URL
		}
	}
	return cr, nil
}

// sameServer compares two server URLs, ignoring a trailing slash.
func sameServer(a, b string) bool {
	return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
}

// unauthenticatedMessage explains a 401 answer: how to log in when no
// token was sent, or that the token sent was refused and how to log in
// again.
func (cr credentials) unauthenticatedMessage(err error) string {
	login := fmt.Sprintf(`"capblock login --url %s --token-file admin.token"`, cr.url)
	if cr.token == "" {
		msg := "no API token"
		if cr.otherLogin != "" {
			msg += fmt.Sprintf(" for %s (you are logged in to %s only)", cr.url, cr.otherLogin)
		}
		return msg + ": run " + login +
			" (the first administrator's token is in admin.token beside the server's database), or set CAPBLOCK_TOKEN"
	}
	detail := "the token is not valid"
	var p *client.Problem
	if errors.As(err, &p) && p.Detail != "" {
		detail = p.Detail
	}
	return fmt.Sprintf("the server at %s refused the API token from %s (%s); log in again with %s (or a token file of yours), or set CAPBLOCK_TOKEN",
		cr.url, cr.tokenSource, detail, login)
}
