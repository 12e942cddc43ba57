package tfprovider_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"capblock/internal/client"
	"capblock/internal/testbin"
)

// tofuVersion is the OpenTofu that scripts/terraform-cli.sh builds when
// no terraform is installed; the two must name the same.
const tofuVersion = "v1.10.10"

// terraformCLI finds a Terraform CLI: $CAPBLOCK_TERRAFORM (which .ci/run
// sets from scripts/terraform-cli.sh), terraform on PATH, or the OpenTofu
// the script cached. Without one the test skips, or fails under CI=true.
func terraformCLI(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CAPBLOCK_TERRAFORM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("CAPBLOCK_TERRAFORM=%s: %v", p, err)
		}
		return p
	}
	if p, err := exec.LookPath("terraform"); err == nil {
		return p
	}
	cache := os.Getenv("CAPBLOCK_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "capblock")
	}
	if p := filepath.Join(cache, "tofu", tofuVersion, "tofu"); isExecutable(p) {
		return p
	}
	msg := "no Terraform CLI: install terraform, or run scripts/terraform-cli.sh (builds OpenTofu " + tofuVersion + " into the cache), or set CAPBLOCK_TERRAFORM"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// buildProvider builds cmd/terraform-provider-capblock into a directory of
// its own, which the CLI configuration's dev_overrides points at.
func buildProvider(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, "terraform-provider-capblock"),
		"capblock/cmd/terraform-provider-capblock").CombinedOutput()
	if err != nil {
		t.Fatalf("building the provider: %v\n%s", err, out)
	}
	return dir
}

// server is `capblock serve` as a process: the demo fleet, a fresh SQLite
// file and a simulated clock at simStart.
type server struct {
	url   string
	token string // the first administrator's
	api   *client.Client
}

func startServer(t *testing.T, simStart time.Time) *server {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(testbin.Capblock(t), "serve", "--db", filepath.Join(dir, "capblock.db"), "--listen", "127.0.0.1:0",
		"--sim-clock", "--sim-start", simStart.Format(time.RFC3339), "--rate-limit", "0", "--webhook-allow-private")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	url := testbin.Serve(t, cmd, 30*time.Second)
	token, err := os.ReadFile(filepath.Join(dir, "admin.token"))
	if err != nil {
		t.Fatalf("reading the admin token: %v", err)
	}
	s := &server{url: url, token: strings.TrimSpace(string(token))}
	if s.api, err = client.New(url, client.WithToken(s.token)); err != nil {
		t.Fatal(err)
	}
	return s
}

// workspace is a Terraform working directory using the built provider
// through dev_overrides, with the server's URL and token in the
// environment the provider reads.
type workspace struct {
	t   *testing.T
	cli string
	dir string
	env []string
}

func newWorkspace(t *testing.T, cli, providerDir string, s *server) *workspace {
	t.Helper()
	dir := t.TempDir()
	rc := filepath.Join(dir, "dev.tfrc")
	// "capblock/capblock" reads as the CLI's default registry: Terraform's
	// and OpenTofu's differ, and the override applies to either.
	cfg := fmt.Sprintf("provider_installation {\n  dev_overrides {\n    \"capblock/capblock\" = %q\n  }\n  direct {}\n}\n", providerDir)
	if err := os.WriteFile(rc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1",
		"CAPBLOCK_URL="+s.url, "CAPBLOCK_TOKEN="+s.token)
	return &workspace{t: t, cli: cli, dir: dir, env: env}
}

// write replaces the configuration.
func (w *workspace) write(hcl string) {
	w.t.Helper()
	if err := os.WriteFile(filepath.Join(w.dir, "main.tf"), []byte(hcl), 0o600); err != nil {
		w.t.Fatal(err)
	}
}

// run runs the CLI and returns its output and exit code.
func (w *workspace) run(args ...string) (string, int) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, w.cli, append(args[:1:1], append([]string{"-no-color"}, args[1:]...)...)...)
	cmd.Dir, cmd.Env = w.dir, w.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	}
	w.t.Fatalf("%s %s: %v\n%s", w.cli, strings.Join(args, " "), err, out.String())
	return "", -1
}

// must runs the CLI and fails the test unless it exits 0.
func (w *workspace) must(args ...string) string {
	w.t.Helper()
	out, code := w.run(args...)
	if code != 0 {
		w.t.Fatalf("%s %s: exit %d\n%s", filepath.Base(w.cli), strings.Join(args, " "), code, out)
	}
	return out
}

// noChanges fails the test unless a plan finds nothing to do.
func (w *workspace) noChanges(when string) {
	w.t.Helper()
	out, code := w.run("plan", "-detailed-exitcode")
	if code != 0 {
		w.t.Fatalf("%s: plan -detailed-exitcode exited %d, want 0 (no changes)\n%s", when, code, out)
	}
}
