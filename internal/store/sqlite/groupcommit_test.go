package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"capblock/internal/store/storetest"
)

// TestGroupFailsAlone: in one group, a change that fails its re-check
// fails alone (see storetest.GroupFailsAlone).
func TestGroupFailsAlone(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "capblock.db"))
	storetest.GroupFailsAlone(t, s, s.commitGroup)
}

// TestConcurrentCommitsGroup: commits made at once share transactions,
// and each gets its own answer (see storetest.ConcurrentCommitsGroup).
func TestConcurrentCommitsGroup(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "capblock.db"))
	storetest.ConcurrentCommitsGroup(t, s, s.group.Largest)
}

// groupChildEnv names the database the child of
// TestKillDuringGroupedCommits writes to.
const groupChildEnv = "CAPBLOCK_SQLITE_GROUP_KILL_CHILD_DB"

// TestKillDuringGroupedCommits kills (SIGKILL) a process in the middle
// of a burst of purchases from 32 goroutines, committed in groups:
// every purchase it acknowledged is stored whole, and every purchase
// stored was sent and is whole (see storetest.CheckAfterKill).
func TestKillDuringGroupedCommits(t *testing.T) {
	if path := os.Getenv(groupChildEnv); path != "" {
		s, err := Open(context.Background(), path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		storetest.GroupKillChild(s, s.group.Largest)
		os.Exit(2) // only a failed commit ends the child's goroutines
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	path := filepath.Join(t.TempDir(), "capblock.db")
	cmd, lines := storetest.StartChild(t, "TestKillDuringGroupedCommits", groupChildEnv, path)
	r := storetest.ReadKillChild(t, lines, 2000, func() {
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
	})
	cmd.Wait()
	storetest.CheckAfterKill(t, openTemp(t, path), r)
}
