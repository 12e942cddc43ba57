package e2e

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"capblock/internal/seal"
)

// TestCLIAccessKeys: an administrator makes an access key for a user by
// name with the CLI, which prints the secret once with the AWS settings
// to use; the list shows no secret and fits 120 columns; the key is
// revoked by its access key id; a mistake gets one line and a non-zero
// exit. The server wrote its secrets key beside the database, readable by
// it alone; it does not start on another key file, or on a missing one,
// but says which key the database's secrets need, and makes no key in
// its place.
func TestCLIAccessKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server binary")
	}
	bin, dir := buildBinary(t), t.TempDir()
	db := filepath.Join(dir, "capblock.db")
	srv := startProcess(t, bin, db, ts(t0))
	token, err := os.ReadFile(filepath.Join(dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "secrets.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secrets.key beside the database: %v %v, want mode 0600", fi, err)
	}
	cli := func(args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, bin, srv.url, string(token), args...)
	}
	mustCLI := func(args ...string) string {
		t.Helper()
		out, errOut, code := cli(args...)
		if code != 0 {
			t.Fatalf("%q: exit %d, stderr %q", args, code, errOut)
		}
		return out
	}
	team := regexp.MustCompile(`team-[0-9a-f]+`).FindString(mustCLI("teams", "create", "vision"))
	mustCLI("users", "create", "ada", "--team", team, "--role", "member")

	// 1. Made for ada by name: the secret and the AWS settings, once.
	out, errOut, code := cli("access-keys", "create", "--user", "ada")
	m := regexp.MustCompile(`(?m)^id: +(ak-\S+)\naccess key id: +(AKIA[A-Z0-9]{16})\nsecret access key: +([A-Za-z0-9+/]{40})\nuser: +(usr-\S+)\nendpoint: +(\S+)\n\nexport AWS_ACCESS_KEY_ID=(\S+)\nexport AWS_SECRET_ACCESS_KEY=(\S+)\n$`).FindStringSubmatch(out)
	if code != 0 || m == nil || m[5] != srv.url+"/aws" || m[6] != m[2] || m[7] != m[3] {
		t.Fatalf("access-keys create: exit %d, stdout:\n%s\nwant the id, access key id, secret, user, endpoint %s/aws and the two exports", code, out, srv.url)
	}
	if !strings.Contains(errOut, "shown only now") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("access-keys create: stderr %q, want one line saying the secret is shown only now", errOut)
	}
	id, accessKeyID, secret := m[1], m[2], m[3]

	// 2. Listed without the secret, within 120 columns.
	out = mustCLI("access-keys", "list")
	if !strings.Contains(out, id) || !strings.Contains(out, accessKeyID) || !strings.Contains(out, " ada ") ||
		!strings.Contains(out, " vision ") || !strings.Contains(out, "active") || strings.Contains(out, secret) {
		t.Errorf("access-keys list:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if len(line) > 120 {
			t.Errorf("a line of %d columns, more than 120: %q", len(line), line)
		}
	}

	// 3. Revoked by its access key id.
	out = mustCLI("access-keys", "revoke", accessKeyID, "--yes")
	if !strings.Contains(out, id) || !strings.Contains(out, "revoked") {
		t.Errorf("access-keys revoke:\n%s", out)
	}

	// 4. Mistakes: one line, a non-zero exit, nothing made.
	for _, args := range [][]string{
		{"access-keys", "create", "--user", "nobody"},
		{"access-keys", "revoke", "ak-0000000000000000"},
		{"access-keys", "revoke"},
	} {
		out, errOut, code = cli(args...)
		if code == 0 || out != "" || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want one line on stderr and a non-zero exit", args, code, out, errOut)
		}
	}
	if out = mustCLI("access-keys", "list"); strings.Count(out, "\n") != 2 {
		t.Errorf("after the mistakes, access-keys list shows more than the one key:\n%s", out)
	}

	// 5. Another key file: the server does not start, and names the key
	// the database's secrets were sealed under; a missing one is not made
	// anew. The right one starts it again.
	if err := srv.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = srv.cmd.Wait()
	key, err := seal.Load(filepath.Join(dir, "secrets.key"))
	if err != nil {
		t.Fatal(err)
	}
	otherPath := filepath.Join(dir, "other.key")
	refused := func(what string, want ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, "serve", "--db", db, "--listen", freeAddr(t), "--sim-clock",
			"--secrets-key-file", otherPath, "--allow-unisolated-jobs").CombinedOutput()
		if err == nil || ctx.Err() != nil {
			t.Fatalf("the server started on %s: %v\n%s", what, err, out)
		}
		for _, w := range append(want, key.ID()) {
			if !strings.Contains(string(out), w) {
				t.Errorf("the refusal to start on %s does not say %q:\n%s", what, w, out)
			}
		}
	}
	refused("a missing key file", otherPath, "restore")
	if _, err := os.Stat(otherPath); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a new key file was made for a database of sealed secrets: %v", err)
	}
	other, _, err := seal.LoadOrCreate(otherPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	refused("another key file", other.ID())
	again := startProcess(t, bin, db, "")
	if code := call(t, again.url, "GET", "/v1/access-keys", nil, nil, strings.TrimSpace(string(token))); code != 200 {
		t.Fatalf("listing access keys on the server started again with its key file: %d", code)
	}
}
