package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionNamesTheCommit: a binary built from a checkout with its
// version control information names the commit it was built from.
func TestVersionNamesTheCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout, or no git: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "capblock")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "capblock/cmd/capblock").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("capblock version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "commit "+strings.TrimSpace(string(head))+" of ") {
		t.Errorf("capblock version printed %q; want the commit %s", out, head)
	}
}
