package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIDisable: an administrator disables a team with the CLI: its
// member's token is refused in one line, and the team list says it is
// disabled; enabled again, the token works. Disabling one's own team is
// refused in one line with a non-zero exit.
func TestCLIDisable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server binary")
	}
	bin, dir := buildBinary(t), t.TempDir()
	srv := startProcess(t, bin, filepath.Join(dir, "capblock.db"), ts(t0))
	admin, err := os.ReadFile(filepath.Join(dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	run := func(token string, args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, bin, srv.url, token, args...)
	}
	cli := func(args ...string) string {
		t.Helper()
		out, errOut, code := run(string(admin), args...)
		if code != 0 {
			t.Fatalf("capblock %v: exit %d: %s", args, code, errOut)
		}
		return out
	}
	cli("teams", "create", "vision")
	var u struct{ ID string }
	if err := json.Unmarshal([]byte(cli("-o", "json", "users", "create", "grace", "--team", teamIDOf(t, cli("-o", "json", "teams", "list"), "vision"), "--role", "member")), &u); err != nil {
		t.Fatal(err)
	}
	var tok struct{ Token string }
	if err := json.Unmarshal([]byte(cli("-o", "json", "tokens", "create", "--user", u.ID)), &tok); err != nil || tok.Token == "" {
		t.Fatalf("token: %v %+v", err, tok)
	}
	if _, errOut, code := run(tok.Token, "blocks", "list"); code != 0 {
		t.Fatalf("grace before: exit %d: %s", code, errOut)
	}

	if out := cli("teams", "disable", "vision"); !strings.HasPrefix(out, "team vision (") || !strings.HasSuffix(out, ") is disabled\n") {
		t.Errorf("teams disable: %q", out)
	}
	if out := cli("teams", "list"); !strings.Contains(out, "disabled 2026-") {
		t.Errorf("teams list does not say vision is disabled:\n%s", out)
	}
	out, errOut, code := run(tok.Token, "blocks", "list")
	if code == 0 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "team vision was disabled") {
		t.Errorf("grace while vision is disabled: exit %d, stdout %q, stderr %q; want one line saying why", code, out, errOut)
	}
	cli("teams", "enable", "vision")
	if _, errOut, code := run(tok.Token, "blocks", "list"); code != 0 {
		t.Errorf("grace after the team is enabled: exit %d: %s", code, errOut)
	}

	useToken(t, srv.url, filepath.Join(dir, "admin.token"))
	var me struct{ User user }
	if code := call(t, srv.url, "GET", "/v1/whoami", nil, &me); code != 200 {
		t.Fatalf("whoami: %d", code)
	}
	out, errOut, code = run(string(admin), "teams", "disable", me.User.Team)
	if code == 0 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "your own team") {
		t.Errorf("disabling one's own team: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// teamIDOf finds the id of the team named name in `teams list -o json`.
func teamIDOf(t *testing.T, listJSON, name string) string {
	t.Helper()
	var out struct{ Teams []struct{ ID, Name string } }
	if err := json.Unmarshal([]byte(listJSON), &out); err != nil {
		t.Fatal(err)
	}
	for _, tm := range out.Teams {
		if tm.Name == name {
			return tm.ID
		}
	}
	t.Fatalf("no team %s in %s", name, listJSON)
	return ""
}
