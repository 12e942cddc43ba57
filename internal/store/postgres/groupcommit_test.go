package postgres

import (
	"context"
	"testing"

	"capblock/internal/store"
	"capblock/internal/store/pgtest"
	"capblock/internal/store/storetest"
)

// TestGroupFailsAlone: in one group, a change that fails its re-check,
// the exclusion constraint's included, fails alone (see
// storetest.GroupFailsAlone).
func TestGroupFailsAlone(t *testing.T) {
	s := openTemp(t, pgtest.NewDatabase(t))
	storetest.GroupFailsAlone(t, s, func(ctxs []context.Context, cs []store.Change) []error {
		batch := make([]*commitRequest, len(cs))
		for i, c := range cs {
			data, err := store.EncodeEvents(c.Events)
			if err != nil {
				t.Fatal(err)
			}
			used, err := store.UsedOfferings(c.Offerings)
			if err != nil {
				t.Fatal(err)
			}
			batch[i] = &commitRequest{ctx: ctxs[i], c: c, data: data, used: used}
		}
		s.commitGroup(batch)
		errs := make([]error, len(batch))
		for i, r := range batch {
			errs[i] = r.err
		}
		return errs
	})
}

// TestConcurrentCommitsGroup: commits made at once share transactions,
// and each gets its own answer (see storetest.ConcurrentCommitsGroup).
func TestConcurrentCommitsGroup(t *testing.T) {
	s := openTemp(t, pgtest.NewDatabase(t))
	storetest.ConcurrentCommitsGroup(t, s, s.group.Largest)
}
