package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// redoclyCLI is the pinned linter of the OpenAPI document. npx keeps it
// in npm's cache (~/.npm), so only the first run downloads it.
const redoclyCLI = "@redocly/cli@2.77.0"

// needTool skips the test when a tool it needs is missing, and fails it
// under CI=true, where every tool must be there.
func needTool(t *testing.T, what string, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is needed under CI=true: %v", what, err)
	}
	t.Skipf("%s is missing, so the document is not linted (install Node.js with npx): %v", what, err)
}

// TestOpenAPILints lints the document that the API serves, with and
// without the simulated clock's routes, with redocly's recommended rules
// (testdata/redocly): no error and no warning.
func TestOpenAPILints(t *testing.T) {
	npx, err := exec.LookPath("npx")
	if err != nil {
		needTool(t, "npx", err)
	}
	dir := t.TempDir()
	for _, name := range []string{"redocly.yaml", ".redocly.lint-ignore.yaml"} {
		b, err := os.ReadFile(filepath.Join("testdata", "redocly", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files := []string{"wall-clock.json", "sim-clock.json"}
	for _, name := range files {
		fake := newFake()
		if name == "sim-clock.json" {
			fake.clock = &fakeClock{now: t0}
		}
		r := newTestAPI(t, fake, Options{}).do(t, http.MethodGet, "/openapi.json", "")
		if r.status != http.StatusOK {
			t.Fatalf("GET /openapi.json: status %d", r.status)
		}
		if err := os.WriteFile(filepath.Join(dir, name), r.body, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	run := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, npx, append([]string{"--yes", redoclyCLI}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_COLOR=1")
		return cmd.Output()
	}
	if out, err := run("--version"); err != nil {
		needTool(t, redoclyCLI+" (through npx, which installs it from the npm registry)", describe(err, out))
	}
	out, err := run(append([]string{"lint", "--config", "redocly.yaml", "--format", "json"}, files...)...)
	type problem struct {
		RuleID   string `json:"ruleId"`
		Severity string
		Message  string
		Location []struct {
			Source  struct{ Ref string }
			Pointer string
		}
	}
	// One report per file.
	var nErrors, nWarnings, ignored, reports int
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var report struct {
			Totals struct {
				Errors, Warnings, Ignored int
			}
			Problems []problem
		}
		if jerr := dec.Decode(&report); jerr == io.EOF {
			break
		} else if jerr != nil {
			t.Fatalf("redocly lint did not report in JSON (%v): %v\n%s", err, jerr, out)
		}
		reports++
		nErrors += report.Totals.Errors
		nWarnings += report.Totals.Warnings
		ignored += report.Totals.Ignored
		for _, p := range report.Problems {
			where := ""
			if len(p.Location) > 0 {
				where = filepath.Base(p.Location[0].Source.Ref) + p.Location[0].Pointer
			}
			t.Errorf("%s %s: %s at %s", p.Severity, p.RuleID, p.Message, where)
		}
	}
	if reports != len(files) {
		t.Fatalf("redocly lint reported on %d documents, want %d:\n%s", reports, len(files), out)
	}
	if nErrors != 0 || nWarnings != 0 {
		t.Errorf("redocly lint: %d errors, %d warnings, want none", nErrors, nWarnings)
	}
	// Only the probes' lack of a 4xx is ignored, in each document.
	if want := 2 * len(files); ignored != want {
		t.Errorf("redocly lint ignored %d problems, want %d (the probes' operation-4xx-response)", ignored, want)
	}
	if err != nil && nErrors == 0 {
		t.Errorf("redocly lint failed: %v", describe(err, nil))
	}
}

// describe adds a failed command's standard error to its error.
func describe(err error, out []byte) error {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return &commandError{err: err, detail: strings.TrimSpace(string(ee.Stderr)) + strings.TrimSpace(string(out))}
	}
	return err
}

type commandError struct {
	err    error
	detail string
}

func (e *commandError) Error() string { return e.err.Error() + ": " + e.detail }
