package service

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"capblock/internal/clock"
	"capblock/internal/core"
	"capblock/internal/store/sqlite"
)

// claim claims r in the registry dir for owner, given up at the end of
// the test.
func claim(t *testing.T, dir string, r UIDRange, owner string) (*uidClaim, error) {
	t.Helper()
	c, err := claimUIDRange(dir, r, owner)
	if err == nil {
		t.Cleanup(func() { c.release() })
	}
	return c, err
}

// TestUIDRangeClaims: a range that overlaps a live claim of another
// database is refused, saying which and what to do; one that does not
// overlap, or is of the same database (a replica), is not; a claim given
// up no longer stands in the way.
func TestUIDRangeClaims(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "job-uids")
	if _, err := claim(t, dir, UIDRange{900000, 999999}, "db-a"); err != nil {
		t.Fatalf("first claim: %v", err)
	}
	_, err := claim(t, dir, UIDRange{950000, 1049999}, "db-b")
	if !errors.Is(err, ErrUIDRangeClaimed) {
		t.Fatalf("overlapping claim of another database = %v, want ErrUIDRangeClaimed", err)
	}
	for _, want := range []string{"950000-1049999 overlaps 900000-999999", fmt.Sprintf("pid %d", os.Getpid()), "--job-uid-range", dir} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	if _, err := claim(t, dir, UIDRange{800000, 899999}, "db-b"); err != nil {
		t.Errorf("a range of its own: %v", err)
	}
	if _, err := claim(t, dir, UIDRange{900000, 999999}, "db-a"); err != nil {
		t.Errorf("a replica of the same database: %v", err)
	}
	c, err := claim(t, dir, UIDRange{100000, 100009}, "db-c")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.release(); err != nil {
		t.Fatal(err)
	}
	if _, err := claim(t, dir, UIDRange{100005, 100005}, "db-d"); err != nil {
		t.Errorf("a range given up by its holder: %v", err)
	}
}

// TestUIDClaimHelper is not a test: TestUIDRangeClaimOfADeadServer runs
// the test binary with it as a server that claims a range, says so and
// waits to be killed.
func TestUIDClaimHelper(t *testing.T) {
	dir := os.Getenv("CAPBLOCK_UID_CLAIM_DIR")
	if dir == "" {
		t.Skip("helper process for TestUIDRangeClaimOfADeadServer")
	}
	if _, err := claimUIDRange(dir, UIDRange{900000, 999999}, "db-dead"); err != nil {
		t.Fatal(err)
	}
	fmt.Println("claimed")
	select {} // until killed
}

// TestUIDRangeClaimOfADeadServer: the claim of a server killed outright
// (SIGKILL) blocks nobody: the next claim finds its lock gone with it,
// and removes it.
func TestUIDRangeClaimOfADeadServer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "job-uids")
	server := exec.Command(os.Args[0], "-test.run=^TestUIDClaimHelper$")
	server.Env = append(os.Environ(), "CAPBLOCK_UID_CLAIM_DIR="+dir)
	out, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "claimed\n" {
		server.Process.Kill()
		server.Wait()
		t.Fatalf("the helper said %q", line)
	}
	if _, err := claim(t, dir, UIDRange{999999, 999999}, "db-live"); !errors.Is(err, ErrUIDRangeClaimed) {
		t.Fatalf("claim over a live server's range = %v, want ErrUIDRangeClaimed", err)
	}
	if err := server.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	server.Wait()
	if _, err := claim(t, dir, UIDRange{999999, 999999}, "db-live"); err != nil {
		t.Fatalf("claim over a dead server's range: %v", err)
	}
	stale, _ := filepath.Glob(filepath.Join(dir, "900000-999999.*.claim"))
	if len(stale) != 0 {
		t.Errorf("the dead server's claim %v is still there", stale)
	}
}

// TestServiceRefusesAnotherDatabasesUIDRange: a second service on this
// machine, of another database, with a range of job users that overlaps
// the first's, does not start; one of the same database does.
func TestServiceRefusesAnotherDatabasesUIDRange(t *testing.T) {
	registry := filepath.Join(t.TempDir(), "job-uids")
	open := func(db string) (*Service, error) {
		st, err := sqlite.Open(t.Context(), db)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		svc, err := New(t.Context(), Config{Fleet: core.Fleet{Currency: "USD", Limits: core.DefaultLimits(), Pricing: core.DefaultPricing()},
			Store: st, Clock: clock.NewSim(planT0), Log: slog.New(slog.DiscardHandler), Workloads: newRecordedWorkloads(),
			JobUIDs: UIDRange{900000, 999999}, JobUIDRegistry: registry})
		if err == nil {
			t.Cleanup(func() { svc.Close() })
		}
		return svc, err
	}
	dir := t.TempDir()
	if _, err := open(filepath.Join(dir, "one.db")); err != nil {
		t.Fatalf("the first server: %v", err)
	}
	if _, err := open(filepath.Join(dir, "one.db")); err != nil {
		t.Errorf("a replica of the first's database: %v", err)
	}
	_, err := open(filepath.Join(dir, "two.db"))
	if !errors.Is(err, ErrUIDRangeClaimed) {
		t.Fatalf("a server of another database with the same range = %v, want ErrUIDRangeClaimed", err)
	}
	t.Logf("refused: %v", err)
}
