package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLINodesFailAndRecover: an administrator fails a node with the
// CLI, sees it unhealthy with the reason and who said so, and recovers
// it; a mistake gets one line and a non-zero exit.
func TestCLINodesFailAndRecover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server binary")
	}
	bin, dir := buildBinary(t), t.TempDir()
	srv := startProcess(t, bin, filepath.Join(dir, "capblock.db"), ts(t0))
	token, err := os.ReadFile(filepath.Join(dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, bin, srv.url, string(token), args...)
	}
	node := "a-h100-01" // a node of the demo fleet
	out, errOut, code := cli("nodes", "fail", node, "--reason", "GPU 3: XID 79")
	if code != 0 || out != "node "+node+" is unhealthy (GPU 3: XID 79; admin)\n" {
		t.Errorf("nodes fail: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, _, _ = cli("nodes")
	if !strings.Contains(out, "unhealthy (GPU 3: XID 79; admin)") {
		t.Errorf("nodes after the fail:\n%s", out)
	}
	out, errOut, code = cli("nodes", "recover", node)
	if code != 0 || out != "node "+node+" is healthy\n" {
		t.Errorf("nodes recover: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, args := range [][]string{{"nodes", "fail"}, {"nodes", "recover", "no-such-node"}} {
		out, errOut, code = cli(args...)
		if code == 0 || out != "" || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want one line on stderr and a non-zero exit", args, code, out, errOut)
		}
	}
}
