package service

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"capblock/internal/backend"
	"capblock/internal/clock"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/fleet"
	"capblock/internal/store/sqlite"
)

// TestJobFillingTmpDoesNotStopPurchases: a job that fills /tmp meets
// ENOSPC at its tmp limit, in a /tmp of its own (the host's never sees
// its file), and goes on trying while the server buys blocks: the
// database's file system is not the job's to fill.
func TestJobFillingTmpDoesNotStopPurchases(t *testing.T) {
	// Only root can mount a job's /tmp (the executor's tests show where
	// it cannot, and why).
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this test needs root, to give a job a /tmp of its own; CI runs as root")
		}
		t.Skip("needs root: only root can give a job a /tmp of its own")
	}
	ctx := t.Context()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "capblock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := New(ctx, Config{Fleet: fleet.Demo(), Store: st, Clock: clock.NewSim(now), Log: slog.New(slog.DiscardHandler),
		JobsDir: filepath.Join(t.TempDir(), "jobs"), JobLimits: backend.Limits{TmpBytes: 8 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTeam(ctx, core.Team{ID: "team-a", Name: "a", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	runService(t, svc)
	buy := func(token string, start time.Time) core.Block {
		t.Helper()
		offs, err := svc.Offerings(ctx, core.SearchRequest{Types: []string{"l4.1x"}, Count: 1, Duration: time.Hour,
			StartAfter: start, EndBefore: start.Add(2 * time.Hour)})
		if err != nil || len(offs) == 0 {
			t.Fatalf("searching: %v %v", offs, err)
		}
		b, _, err := svc.Purchase(ctx, contract.PurchaseRequest{Team: "team-a", OfferingID: offs[0].ID, ClientToken: token})
		if err != nil {
			t.Fatalf("buying %s: %v", token, err)
		}
		return b
	}

	// 1. A job on an active block fills its /tmp, and keeps writing.
	b := buy("for-the-job", now.Add(time.Hour))
	if _, err := svc.SimClock().Advance(time.Hour); err != nil {
		t.Fatal(err)
	}
	stamp := fmt.Sprintf("capblock-fill-%d", time.Now().UnixNano())
	t.Cleanup(func() { os.Remove("/tmp/" + stamp); os.Remove("/tmp/" + stamp + ".more") })
	script := fmt.Sprintf(`dd if=/dev/zero of=/tmp/%[1]s bs=1048576 count=64 2>&1; echo "dd exit $?"
while :; do dd if=/dev/zero of=/tmp/%[1]s.more bs=1048576 count=1 2>/dev/null; sleep 0.02; done`, stamp)
	j, err := svc.CreateJob(ctx, "team-a", contract.JobRequest{BlockID: b.ID, Command: []string{"/bin/sh", "-c", script}, InstanceCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	var log string
	waitFor(t, time.Minute, "the job to fill its /tmp", func() bool {
		data, _, err := svc.JobLogs(ctx, "team-a", j.ID, 0, 0, 1<<20)
		log = string(data)
		return err == nil && strings.Contains(log, "dd exit")
	})
	if !strings.Contains(log, "No space left on device") || !strings.Contains(log, "dd exit 1") {
		t.Fatalf("the job's /tmp did not fill at its limit:\n%s", log)
	}

	// 2. Meanwhile the server commits purchases.
	for i := range 8 {
		buy(fmt.Sprintf("while-full-%d", i), now.Add(time.Duration(2+i)*time.Hour))
	}
	if got, err := svc.GetJob(ctx, "team-a", j.ID); err != nil || got.State != core.JobRunning {
		t.Errorf("the job: %+v, %v; want it still running, writing", got, err)
	}
	if _, err := os.Stat("/tmp/" + stamp); err == nil {
		t.Errorf("the job's file reached the host's /tmp")
	}

	// 3. Stopped, it ends.
	if _, err := svc.StopJob(ctx, "team-a", j.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the job's instance to end", func() bool {
		svc.jobs.mu.Lock()
		defer svc.jobs.mu.Unlock()
		return len(svc.jobs.live) == 0
	})
}
