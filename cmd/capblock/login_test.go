package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testToken is a well-formed API token made of c (a base64url letter).
func testToken(c string) string { return "cbt_" + strings.Repeat(c, 42) + "A" }

// writeTokenFile writes token to a file the way `capblock serve` does.
func writeTokenFile(t *testing.T, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "admin.token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// configFile is where the tests' logins are stored.
func configFile(t *testing.T) string {
	t.Helper()
	return filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "capblock", "config.json")
}

// login logs in to url with token, failing the test when it does not work.
func login(t *testing.T, url, token string) {
	t.Helper()
	if got := runApp(t.Context(), nil, "login", "--url", url, "--token-file", writeTokenFile(t, token)); got.code != 0 {
		t.Fatalf("login: exit %d, stderr %q", got.code, got.stderr)
	}
}

func TestLogin(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	api := newFakeAPI(t)
	token := testToken("A")
	got := runApp(t.Context(), nil, "login", "--url", api.URL+"/", "--token-file", writeTokenFile(t, token))
	want := result{
		stdout: "logged in to " + api.URL + " as root (admin) of team ops (team-0)\n",
		stderr: "stored in " + configFile(t) + "\n",
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"GET /v1/whoami", "GET /v1/teams/team-0"}, api.seen()); diff != "" {
		t.Errorf("requests mismatch (-want +got):\n%s", diff)
	}
	for _, auth := range api.seenAuth() {
		if auth != "Bearer "+token {
			t.Errorf("Authorization %q, want the token from the file", auth)
		}
	}

	// 1. The file is the owner's only, and holds the server, token and user.
	info, err := os.Stat(configFile(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("config file mode %v, want 0600", info.Mode().Perm())
	}
	dir, err := os.Stat(filepath.Dir(configFile(t)))
	if err != nil {
		t.Fatal(err)
	}
	if dir.Mode().Perm() != 0o700 {
		t.Errorf("config directory mode %v, want 0700", dir.Mode().Perm())
	}
	data, err := os.ReadFile(configFile(t))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]string
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("config is not JSON: %v\n%s", err, data)
	}
	if diff := cmp.Diff(map[string]string{"url": api.URL, "token": token, "user": "usr-1"}, cfg); diff != "" {
		t.Errorf("config mismatch (-want +got):\n%s", diff)
	}

	// 2. Other commands use it, and never print the token.
	got = runApp(t.Context(), nil, "tokens", "create")
	if got.code != 0 || strings.Contains(got.stdout+got.stderr, token) {
		t.Errorf("tokens create: exit %d, stdout %q, stderr %q", got.code, got.stdout, got.stderr)
	}
	requests := api.seen()
	if last := requests[len(requests)-1]; last != "POST /v1/users/usr-1/tokens {}" {
		t.Errorf("tokens create sent %q, want the stored user's id without asking the server", last)
	}

	// 3. Logout forgets it.
	got = runApp(t.Context(), nil, "logout")
	if diff := cmp.Diff(result{stdout: "logged out of " + api.URL + "\n"}, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("logout mismatch (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(configFile(t)); !os.IsNotExist(err) {
		t.Errorf("config file still there after logout: %v", err)
	}
	got = runApp(t.Context(), nil, "logout")
	if diff := cmp.Diff(result{stderr: "not logged in (there is no " + configFile(t) + ")\n"}, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("second logout mismatch (-want +got):\n%s", diff)
	}
}

func TestLoginWithTokenFlagAndJSON(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	api := newFakeAPI(t)
	token := testToken("B")
	got := runApp(t.Context(), map[string]string{"CAPBLOCK_URL": api.URL}, "-o", "json", "login", "--token", token)
	if got.code != 0 || got.stderr != "" || strings.Contains(got.stdout, token) {
		t.Fatalf("exit %d, stdout %q, stderr %q", got.code, got.stdout, got.stderr)
	}
	assertJSON(t, `{"url": "`+api.URL+`", "config": "`+configFile(t)+`", "user": `+userRoot+`}`, got.stdout)
}

func TestLoginFailures(t *testing.T) {
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		problem(w, http.StatusUnauthorized, "unauthenticated", "unknown, revoked or expired token")
	}))
	t.Cleanup(refusing.Close)
	good := writeTokenFile(t, testToken("A"))
	bad := writeTokenFile(t, "not-a-token")
	tests := map[string]struct {
		args []string
		want result
	}{
		"refused": {
			args: []string{"login", "--url", refusing.URL, "--token-file", good},
			want: result{code: 1, stderr: "capblock: the server at " + refusing.URL + " refused the token from " + good + ": unknown, revoked or expired token\n"},
		},
		"no token": {
			args: []string{"login", "--url", refusing.URL},
			want: result{code: 2, stderr: "capblock: give --token-file FILE (the first administrator's is admin.token beside the server's database) or --token TOKEN (see 'capblock login --help')\n"},
		},
		"both": {
			args: []string{"login", "--url", refusing.URL, "--token-file", good, "--token", testToken("A")},
			want: result{code: 2, stderr: "capblock: give --token-file or --token, not both (see 'capblock login --help')\n"},
		},
		"not a token": {
			args: []string{"login", "--url", refusing.URL, "--token-file", bad},
			want: result{code: 2, stderr: "capblock: " + bad + " does not hold a capblock API token (cbt_ followed by 43 characters) (see 'capblock login --help')\n"},
		},
		"no file": {
			args: []string{"login", "--url", refusing.URL, "--token-file", bad + ".missing"},
			want: result{code: 1, stderr: "capblock: reading the token: open " + bad + ".missing: no such file or directory\n"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Setenv("XDG_CONFIG_HOME", t.TempDir())
			got := runApp(t.Context(), nil, tc.args...)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("result mismatch (-want +got):\n%s", diff)
			}
			if _, err := os.Stat(configFile(t)); !os.IsNotExist(err) {
				t.Errorf("a failed login wrote the config: %v", err)
			}
		})
	}
}

// TestCredentialPrecedence checks flag > environment > stored login >
// default, and that the stored token goes only to its own server.
func TestCredentialPrecedence(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	stored, other := newFakeAPI(t), newFakeAPI(t)
	login(t, stored.URL, testToken("A"))
	stored.mu.Lock()
	stored.requests, stored.auths = nil, nil
	stored.mu.Unlock()
	tests := map[string]struct {
		env       map[string]string
		args      []string
		wantTo    *fakeAPI
		wantToken string
	}{
		"the stored login": {
			wantTo: stored, wantToken: testToken("A"),
		},
		"CAPBLOCK_TOKEN over the stored token": {
			env:    map[string]string{"CAPBLOCK_TOKEN": testToken("B")},
			wantTo: stored, wantToken: testToken("B"),
		},
		"--token over CAPBLOCK_TOKEN": {
			env:    map[string]string{"CAPBLOCK_TOKEN": testToken("B")},
			args:   []string{"--token", testToken("C")},
			wantTo: stored, wantToken: testToken("C"),
		},
		"CAPBLOCK_URL over the stored server, without the stored token": {
			env:    map[string]string{"CAPBLOCK_URL": other.URL},
			wantTo: other, wantToken: "",
		},
		"--url over CAPBLOCK_URL, with the stored token for its server": {
			env:    map[string]string{"CAPBLOCK_URL": other.URL},
			args:   []string{"--url", stored.URL + "/"},
			wantTo: stored, wantToken: testToken("A"),
		},
		"--url and --token": {
			args:   []string{"--url", other.URL, "--token", testToken("C")},
			wantTo: other, wantToken: testToken("C"),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := runApp(t.Context(), tc.env, append(tc.args, "nodes")...)
			if got.code != 0 {
				t.Fatalf("exit %d, stderr %q", got.code, got.stderr)
			}
			auth := tc.wantTo.seenAuth()
			if len(auth) == 0 {
				t.Fatalf("the request did not go to the expected server")
			}
			want := ""
			if tc.wantToken != "" {
				want = "Bearer " + tc.wantToken
			}
			if auth[len(auth)-1] != want {
				t.Errorf("Authorization %q, want %q", auth[len(auth)-1], want)
			}
		})
	}
	if n := len(stored.seen()) + len(other.seen()); n != len(tests) {
		t.Errorf("%d requests for %d commands", n, len(tests))
	}
}

func TestDefaultServer(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	a := &app{getenv: func(string) string { return "" }, configDir: os.UserConfigDir}
	cr, err := a.resolveCredentials()
	if err != nil || cr.url != defaultURL || cr.token != "" {
		t.Errorf("credentials %+v, %v; want the default URL and no token", cr, err)
	}
}

// unauthorized answers every request with 401 and detail.
func unauthorized(t *testing.T, detail string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		problem(w, http.StatusUnauthorized, "unauthenticated", detail)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestUnauthenticatedMessages(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	url := unauthorized(t, "a valid API token is required")
	got := runApp(t.Context(), nil, "--url", url, "blocks", "list")
	want := result{code: 1, stderr: `capblock: no API token: run "capblock login --url ` + url + ` --token-file admin.token"` +
		` (the first administrator's token is in admin.token beside the server's database), or set CAPBLOCK_TOKEN` + "\n"}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("no token (-want +got):\n%s", diff)
	}

	expired := unauthorized(t, "token tok-2 has expired")
	got = runApp(t.Context(), map[string]string{"CAPBLOCK_TOKEN": testToken("B")}, "--url", expired, "blocks", "list")
	want = result{code: 1, stderr: `capblock: the server at ` + expired + ` refused the API token from CAPBLOCK_TOKEN (token tok-2 has expired);` +
		` log in again with "capblock login --url ` + expired + ` --token-file admin.token" (or a token file of yours), or set CAPBLOCK_TOKEN` + "\n"}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("refused token (-want +got):\n%s", diff)
	}

	// A stored login for another server says so.
	api := newFakeAPI(t)
	login(t, api.URL, testToken("A"))
	got = runApp(t.Context(), nil, "--url", url, "types")
	if !strings.HasPrefix(got.stderr, "capblock: no API token for "+url+" (you are logged in to "+api.URL+" only): run ") {
		t.Errorf("stderr %q, want the other login named", got.stderr)
	}

	// The stored token, refused: where it came from, never the token.
	got = runApp(t.Context(), map[string]string{"CAPBLOCK_URL": api.URL}, "--token", "", "types")
	if got.code != 0 {
		t.Fatalf("with the stored login: exit %d, stderr %q", got.code, got.stderr)
	}
	cfg := `{"url": "` + expired + `", "token": "` + testToken("A") + `"}`
	if err := os.WriteFile(configFile(t), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	got = runApp(t.Context(), nil, "types")
	if !strings.HasPrefix(got.stderr, "capblock: the server at "+expired+" refused the API token from the login in "+configFile(t)+" (token tok-2 has expired); log in again") ||
		strings.Contains(got.stderr, testToken("A")) {
		t.Errorf("stderr %q, want the refusal naming the login file", got.stderr)
	}
}

func TestBrokenConfig(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	if err := os.MkdirAll(filepath.Dir(configFile(t)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(configFile(t), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	got := runApp(t.Context(), nil, "types")
	want := result{code: 1, stderr: "capblock: reading " + configFile(t) + ": unexpected end of JSON input; log in again with 'capblock login' or remove the file\n"}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
}

// rateLimitedOnce answers the first request of each route with 429
// (Retry-After: 0) and then hands over to the fake API.
func rateLimitedOnce(t *testing.T) (url string, seen func() []string) {
	t.Helper()
	api := newFakeAPI(t)
	var (
		mu      sync.Mutex
		limited = map[string]bool{}
		log     []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		route := r.Method + " " + r.URL.Path
		log = append(log, route)
		first := !limited[route]
		limited[route] = true
		mu.Unlock()
		if first {
			w.Header().Set("Retry-After", "0")
			problem(w, http.StatusTooManyRequests, "rate_limited", "too many requests with token tok-1; retry in 0.2s")
			return
		}
		api.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), log...)
	}
}

func TestRateLimited(t *testing.T) {
	tests := map[string]struct {
		args         []string
		wantCode     int
		wantStderr   string
		wantRequests []string
	}{
		"a list is retried": {
			args: []string{"blocks", "list"}, wantRequests: []string{"GET /v1/blocks", "GET /v1/blocks", "GET /v1/whoami", "GET /v1/whoami", "GET /v1/teams", "GET /v1/teams"},
		},
		"a purchase with its client token is retried": {
			args: []string{"buy", "cbo-first", "--client-token", "ct-1"}, wantStderr: "*",
			wantRequests: []string{"POST /v1/blocks", "POST /v1/blocks"},
		},
		"creating a team is not": {
			args: []string{"teams", "create", "vision"}, wantCode: 1,
			wantStderr:   "capblock: rate_limited: too many requests with token tok-1; retry in 0.2s; the server limits each token's requests: wait a moment and try again\n",
			wantRequests: []string{"POST /v1/teams"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			url, seen := rateLimitedOnce(t)
			got := runApp(t.Context(), nil, append([]string{"--url", url}, tc.args...)...)
			if tc.wantStderr == "*" {
				tc.wantStderr = got.stderr
			}
			if got.code != tc.wantCode || got.stderr != tc.wantStderr {
				t.Errorf("exit %d, stderr %q; want %d, %q", got.code, got.stderr, tc.wantCode, tc.wantStderr)
			}
			if diff := cmp.Diff(tc.wantRequests, seen()); diff != "" {
				t.Errorf("requests mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
