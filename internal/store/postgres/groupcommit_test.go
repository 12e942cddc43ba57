package postgres

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"capblock/internal/store/pgtest"
	"capblock/internal/store/storetest"
)

// TestGroupFailsAlone: in one group, a change that fails its re-check,
// the exclusion constraint's included, fails alone (see
// storetest.GroupFailsAlone).
func TestGroupFailsAlone(t *testing.T) {
	s := openTemp(t, pgtest.NewDatabase(t))
	storetest.GroupFailsAlone(t, s, s.commitGroup)
}

// TestConcurrentCommitsGroup: commits made at once share transactions,
// and each gets its own answer (see storetest.ConcurrentCommitsGroup).
func TestConcurrentCommitsGroup(t *testing.T) {
	s := openTemp(t, pgtest.NewDatabase(t))
	storetest.ConcurrentCommitsGroup(t, s, s.group.Largest)
}

// groupChildEnv names the database URL the child of the kill tests
// writes to.
const groupChildEnv = "CAPBLOCK_POSTGRES_GROUP_KILL_CHILD_DSN"

// groupKillChild is the child of the kill tests: it commits purchases
// from 32 goroutines to the database of groupChildEnv, in groups (see
// storetest.GroupKillChild). It reports whether it ran.
func groupKillChild() bool {
	dsn := os.Getenv(groupChildEnv)
	if dsn == "" {
		return false
	}
	s, err := Open(context.Background(), dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	storetest.GroupKillChild(s, s.group.Largest)
	os.Exit(0)
	return true
}

// TestKillReplicaDuringGroupedCommits kills (SIGKILL) a replica in the
// middle of a burst of purchases committed in groups: every purchase it
// acknowledged is stored whole, and every purchase stored was sent and
// is whole (see storetest.CheckAfterKill). A group whose COMMIT had not
// reached the server is rolled back with the replica's connections.
func TestKillReplicaDuringGroupedCommits(t *testing.T) {
	if groupKillChild() {
		return
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dsn := pgtest.NewDatabase(t)
	cmd, lines := storetest.StartChild(t, "TestKillReplicaDuringGroupedCommits", groupChildEnv, dsn)
	r := storetest.ReadKillChild(t, lines, 1000, func() {
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
	})
	cmd.Wait()
	storetest.CheckAfterKill(t, openTemp(t, dsn), r)
}

// TestKillServerDuringGroupedCommits crashes PostgreSQL (an immediate
// stop: no checkpoint, no goodbye to its clients) in the middle of a
// burst of purchases committed in groups by one replica, then kills
// the replica and starts the server again on the same data: every
// purchase acknowledged before the crash is stored whole, and every
// purchase stored was sent and is whole.
func TestKillServerDuringGroupedCommits(t *testing.T) {
	if groupKillChild() {
		return
	}
	if testing.Short() {
		t.Skip("starts its own PostgreSQL server and a child process")
	}
	srv := pgtest.Start(t)
	dsn := srv.NewDatabase(t)
	// An acknowledged commit must be on disk when the server dies
	// (pgtest's servers acknowledge before they write by default).
	if _, err := openTemp(t, dsn).pool.Exec(t.Context(),
		`DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET synchronous_commit = on', current_database()); END $$`); err != nil {
		t.Fatal(err)
	}
	cmd, lines := storetest.StartChild(t, "TestKillServerDuringGroupedCommits", groupChildEnv, dsn)
	r := storetest.ReadKillChild(t, lines, 1000, func() {
		// The replica is killed while the server is down, so that
		// nothing it retries after the restart blurs what was
		// acknowledged before it.
		killed := make(chan error, 1)
		go func() {
			time.Sleep(time.Second)
			killed <- cmd.Process.Kill()
		}()
		if err := srv.Restart(2 * time.Second); err != nil {
			t.Fatal(err)
		}
		if err := <-killed; err != nil {
			t.Fatal(err)
		}
	})
	cmd.Wait()
	if r.Failed == 0 {
		t.Errorf("no commit of the replica failed while the server was down")
	}
	storetest.CheckAfterKill(t, openTemp(t, dsn), r)
}
