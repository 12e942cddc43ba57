package postgres

import (
	"testing"

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
