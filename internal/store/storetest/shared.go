package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"capblock/internal/core"
	"capblock/internal/store"
)

// sharedTests check the state that replicas share beyond blocks: the
// teams' job uids, the simulated clock and the used offerings.
var sharedTests = []struct {
	name string
	run  func(*testing.T, Harness)
}{
	{"TeamUID", testTeamUID},
	{"TeamUIDLowestFree", testTeamUIDLowestFree},
	{"TeamUIDRangeFull", testTeamUIDRangeFull},
	{"TeamUIDConcurrent", testTeamUIDConcurrent},
	{"SimClock", testSimClock},
	{"SimClockConcurrent", testSimClockConcurrent},
	{"OfferingUsedOnce", testOfferingUsedOnce},
	{"OfferingUsedConcurrent", testOfferingUsedConcurrent},
	{"OfferingUsedInvalid", testOfferingUsedInvalid},
	{"PruneUsedOfferings", testPruneUsedOfferings},
	{"SharedStateReopen", testSharedStateReopen},
}

// createTeams stores teams t1, t2, … tn.
func createTeams(t *testing.T, s store.Full, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("t%d", i)
		mustDo(t, "CreateTeam("+id+")", s.CreateTeam(t.Context(), makeTeam(id, "team "+id)))
	}
}

// wantUID fails the test unless TeamUID(team, lo, hi) returns want.
func wantUID(t *testing.T, s store.Full, team string, lo, hi, want int) {
	t.Helper()
	got, err := s.TeamUID(t.Context(), team, lo, hi)
	mustDo(t, fmt.Sprintf("TeamUID(%s, %d, %d)", team, lo, hi), err)
	if got != want {
		t.Fatalf("TeamUID(%s, %d, %d) = %d, want %d", team, lo, hi, got, want)
	}
}

func testTeamUID(t *testing.T, h Harness) {
	s := h.Open(t)
	createTeams(t, s, 2)
	_, err := s.TeamUID(t.Context(), "nobody", 1000, 1999)
	wantErr(t, "TeamUID of an unknown team", err, store.ErrNotFound)

	wantUID(t, s, "t1", 1000, 1999, 1000)
	wantUID(t, s, "t2", 1000, 1999, 1001)
	// Recorded: the same uid again, whatever range is asked now.
	wantUID(t, s, "t1", 1000, 1999, 1000)
	wantUID(t, s, "t1", 5000, 5999, 1000)
	wantUID(t, s, "t2", 1, 1, 1001)

	for _, r := range [][2]int{{10, 9}, {0, 10}, {-5, 10}, {1, 1 << 31}} {
		_, err := s.TeamUID(t.Context(), "t1", r[0], r[1])
		wantErr(t, fmt.Sprintf("TeamUID with range %d-%d", r[0], r[1]), err, core.ErrInvalidArgument)
	}
}

// testTeamUIDLowestFree: a team gets the lowest uid of its range that no
// team holds, below or between the uids held.
func testTeamUIDLowestFree(t *testing.T, h Harness) {
	s := h.Open(t)
	createTeams(t, s, 5)
	wantUID(t, s, "t1", 102, 102, 102)
	wantUID(t, s, "t2", 104, 200, 104)
	wantUID(t, s, "t3", 100, 200, 100)
	wantUID(t, s, "t4", 100, 200, 101)
	wantUID(t, s, "t5", 100, 200, 103)
}

func testTeamUIDRangeFull(t *testing.T, h Harness) {
	s := h.Open(t)
	createTeams(t, s, 3)
	wantUID(t, s, "t1", 500, 501, 500)
	wantUID(t, s, "t2", 500, 501, 501)
	_, err := s.TeamUID(t.Context(), "t3", 500, 501)
	wantErr(t, "TeamUID with every uid of the range held", err, core.ErrNoCapacity)
	for _, want := range []string{"full", "--job-uid-range", "500-501"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("TeamUID on a full range: %q does not say %q", err, want)
		}
	}
	// The unknown team is not found, even on a full range.
	_, err = s.TeamUID(t.Context(), "nobody", 500, 501)
	wantErr(t, "TeamUID of an unknown team on a full range", err, store.ErrNotFound)
	// A wider range has room again, and nothing was recorded for t3.
	wantUID(t, s, "t3", 500, 502, 502)
}

// testTeamUIDConcurrent races 8 callers on each of 6 teams at once: the
// callers of one team agree, and no two teams share a uid.
func testTeamUIDConcurrent(t *testing.T, h Harness) {
	const teams, callers = 6, 8
	s := h.Open(t)
	createTeams(t, s, teams)
	var (
		wg   sync.WaitGroup
		uids [teams][callers]int
		errs [teams][callers]error
	)
	start := make(chan struct{})
	for i := range teams {
		for c := range callers {
			wg.Go(func() {
				<-start
				uids[i][c], errs[i][c] = s.TeamUID(t.Context(), fmt.Sprintf("t%d", i+1), 2000, 2999)
			})
		}
	}
	close(start)
	wg.Wait()
	owner := map[int]int{}
	for i := range teams {
		for c := range callers {
			mustDo(t, fmt.Sprintf("TeamUID of team %d, caller %d", i+1, c), errs[i][c])
			if uids[i][c] != uids[i][0] {
				t.Fatalf("team %d: callers got uids %v, want one", i+1, uids[i])
			}
		}
		uid := uids[i][0]
		if uid < 2000 || uid > 2999 {
			t.Fatalf("team %d got uid %d, outside 2000-2999", i+1, uid)
		}
		if other, taken := owner[uid]; taken {
			t.Fatalf("teams %d and %d share uid %d", other+1, i+1, uid)
		}
		owner[uid] = i
	}
	// Lowest first: the 6 teams hold 2000 to 2005.
	for uid := 2000; uid < 2000+teams; uid++ {
		if _, ok := owner[uid]; !ok {
			t.Errorf("uid %d is free while teams hold %v", uid, owner)
		}
	}
}

func testSimClock(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	if got, ok, err := s.SimClock(ctx); err != nil || ok {
		t.Fatalf("SimClock of an empty store = %s, %v, %v; want not ok", got, ok, err)
	}
	// Nanoseconds are kept, and the zone does not matter.
	first := t0.Add(90*time.Minute + 123456789*time.Nanosecond).In(time.FixedZone("CET", 3600))
	steps := []struct {
		save, want time.Time
	}{
		{first, first},
		{first.Add(-time.Hour), first},                       // back: refused
		{first.Add(-time.Nanosecond), first},                 // a nanosecond back too
		{first, first},                                       // the same time: no change
		{first.Add(6 * time.Hour), first.Add(6 * time.Hour)}, // forward
	}
	for i, st := range steps {
		got, err := s.SaveSimClock(ctx, st.save)
		mustDo(t, fmt.Sprintf("step %d: SaveSimClock(%s)", i, st.save), err)
		if !got.Equal(st.want) {
			t.Fatalf("step %d: SaveSimClock(%s) = %s, want %s", i, st.save, got, st.want)
		}
		stored, ok, err := s.SimClock(ctx)
		if err != nil || !ok || !stored.Equal(st.want) {
			t.Fatalf("step %d: SimClock = %s, %v, %v; want %s", i, stored, ok, err, st.want)
		}
	}
	for _, bad := range []time.Time{time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)} {
		_, err := s.SaveSimClock(ctx, bad)
		wantErr(t, fmt.Sprintf("SaveSimClock(%s)", bad), err, core.ErrInvalidArgument)
	}
}

// testSimClockConcurrent: replicas moving the clock at once leave the
// latest time stored, and none of them sees it move back.
func testSimClockConcurrent(t *testing.T, h Harness) {
	const savers = 16
	s := h.Open(t)
	var (
		wg  sync.WaitGroup
		got [savers]time.Time
		err [savers]error
	)
	start := make(chan struct{})
	for i := range savers {
		wg.Go(func() {
			<-start
			got[i], err[i] = s.SaveSimClock(t.Context(), hour(i))
		})
	}
	close(start)
	wg.Wait()
	for i := range savers {
		mustDo(t, fmt.Sprintf("SaveSimClock(hour %d)", i), err[i])
		if got[i].Before(hour(i)) {
			t.Errorf("SaveSimClock(hour %d) = %s, earlier than what it saved", i, got[i])
		}
	}
	stored, ok, e := s.SimClock(t.Context())
	if e != nil || !ok || !stored.Equal(hour(savers-1)) {
		t.Fatalf("SimClock = %s, %v, %v; want %s", stored, ok, e, hour(savers-1))
	}
}

// offeringSecret signs the suite's offerings; the store never verifies
// them, it only reads their expiry.
var offeringSecret = []byte("storetest offering secret, 32 b.")

// offeringID returns a signed block offering id, distinct per n, that
// expires at expires.
func offeringID(n int, expires time.Time) string {
	o := core.Offering{Kind: core.KindBlock, InstanceType: "h100.1x", Count: 1, Zone: "zone-1",
		Start: hour(n), End: hour(n + 4), Fee: core.Money{Minor: 12_345, Currency: "USD"},
		OnDemandFee: core.Money{Minor: 20_000, Currency: "USD"}, ExpiresAt: expires}
	o.Sign(offeringSecret)
	return o.ID
}

// purchase is the change of buying block id under client token tok with
// the offerings given.
func purchase(b core.Block, tok string, offerings ...string) store.Change {
	return store.Change{
		Insert:      []core.Block{b},
		Idempotency: []store.IdempotencyRecord{{Team: b.Team, ClientToken: tok, RequestHash: "h-" + tok, Subject: b.ID, CreatedAt: hour(-1)}},
		Journals:    []core.Journal{charge("le-"+b.ID, b.Team, hour(-1), b.Fee, b.ID)},
		Events:      []core.Event{{ID: "ev-" + b.ID, Time: hour(-1), Type: core.EventBlockPurchased, Subject: b.ID, Team: b.Team}},
		Offerings:   offerings,
	}
}

// wantUsed fails the test unless OfferingUsed(id) is want.
func wantUsed(t *testing.T, s store.Store, id string, want bool) {
	t.Helper()
	got, err := s.OfferingUsed(t.Context(), id)
	mustDo(t, "OfferingUsed", err)
	if got != want {
		t.Fatalf("OfferingUsed(%.16s…) = %v, want %v", id, got, want)
	}
}

// testOfferingUsedOnce: an offering buys once. A second commit that uses
// it stores nothing and fails with ErrOfferingUsed, which is no conflict;
// the retry of the first purchase (its client token) fails as a conflict.
func testOfferingUsedOnce(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	used, other := offeringID(0, hour(-1)), offeringID(1, hour(-1))
	wantUsed(t, s, used, false)
	mustCommit(t, s, purchase(makeBlock("b1").on("n1", 0).obj(), "tok-1", used))
	wantUsed(t, s, used, true)
	wantUsed(t, s, other, false)

	// Another token, other GPUs: refused for the offering alone.
	err := s.Commit(ctx, purchase(makeBlock("b2").on("n2", 0).team("team-b").obj(), "tok-2", other, used))
	wantErr(t, "Commit of a used offering", err, core.ErrOfferingUsed)
	if store.IsConflict(err) {
		t.Fatalf("Commit of a used offering: %v is a conflict; a retry cannot succeed", err)
	}
	if _, err := s.GetBlock(ctx, "b2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetBlock(b2) after the refused commit: %v, want not found", err)
	}
	if _, err := s.Idempotency(ctx, "team-b", "tok-2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Idempotency(tok-2) after the refused commit: %v, want not found", err)
	}
	wantNoLedger(t, s, "team-b")
	events, err := s.Events(ctx, "team-b", 0, 0)
	mustDo(t, "Events", err)
	if len(events) != 0 {
		t.Fatalf("events of the refused commit were stored: %+v", events)
	}
	wantUsed(t, s, other, false) // the refused commit's other offering was not kept

	// The first purchase again, under its token: a conflict on the key.
	err = s.Commit(ctx, purchase(makeBlock("b3").on("n3", 0).obj(), "tok-1", used))
	if !store.IsConflict(err) {
		t.Fatalf("retry of the first purchase: got %v, want a conflict (its client token)", err)
	}
	// The other offering is still free to use.
	mustCommit(t, s, purchase(makeBlock("b4").on("n2", 0).team("team-b").obj(), "tok-4", other))
	wantUsed(t, s, other, true)
}

// testOfferingUsedConcurrent races 12 commits of one offering, each with
// its own token and GPUs: exactly one stores its block.
func testOfferingUsedConcurrent(t *testing.T, h Harness) {
	const buyers = 12
	s := h.Open(t)
	id := offeringID(0, hour(-1))
	var (
		wg   sync.WaitGroup
		errs [buyers]error
	)
	start := make(chan struct{})
	for i := range buyers {
		b := makeBlock(fmt.Sprintf("b%d", i)).on(fmt.Sprintf("n%d", i), 0).obj()
		wg.Go(func() {
			<-start
			errs[i] = s.Commit(t.Context(), purchase(b, fmt.Sprintf("tok-%d", i), id))
		})
	}
	close(start)
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, core.ErrOfferingUsed):
			t.Errorf("buyer %d: got %v, want nil or %v", i, err, core.ErrOfferingUsed)
		}
	}
	blocks, err := s.ListBlocks(t.Context(), store.BlockFilter{})
	mustDo(t, "ListBlocks", err)
	if won != 1 || len(blocks) != 1 {
		t.Fatalf("%d commits succeeded and %d blocks are stored, want exactly 1", won, len(blocks))
	}
}

// testOfferingUsedInvalid: what is not an offering id, or an id twice in
// one change, is an invalid change.
func testOfferingUsedInvalid(t *testing.T, h Harness) {
	s := h.Open(t)
	id := offeringID(0, hour(-1))
	for name, ids := range map[string][]string{
		"not an id": {"cbo-nonsense"},
		"empty":     {""},
		"twice":     {id, id},
	} {
		err := s.Commit(t.Context(), purchase(makeBlock("b1").on("n1", 0).obj(), "tok", ids...))
		wantErr(t, "Commit with offerings "+name, err, core.ErrInvalidArgument)
	}
	if _, err := s.GetBlock(t.Context(), "b1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetBlock(b1) after invalid changes: %v, want not found", err)
	}
	wantUsed(t, s, id, false)
}

// testPruneUsedOfferings: pruning forgets the offerings expired before
// the time given, and only those.
func testPruneUsedOfferings(t *testing.T, h Harness) {
	s := h.Open(t)
	early, late := offeringID(0, hour(-10)), offeringID(1, hour(-2))
	mustCommit(t, s, purchase(makeBlock("b1").on("n1", 0).obj(), "tok-1", early))
	mustCommit(t, s, purchase(makeBlock("b2").on("n2", 0).obj(), "tok-2", late))
	n, err := s.PruneUsedOfferings(t.Context(), hour(-10))
	mustDo(t, "PruneUsedOfferings", err)
	if n != 0 {
		t.Fatalf("PruneUsedOfferings at the first expiry pruned %d, want 0 (expired at, not before)", n)
	}
	n, err = s.PruneUsedOfferings(t.Context(), hour(-5))
	mustDo(t, "PruneUsedOfferings", err)
	if n != 1 {
		t.Fatalf("PruneUsedOfferings pruned %d, want 1", n)
	}
	wantUsed(t, s, early, false)
	wantUsed(t, s, late, true)
}

func testSharedStateReopen(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("no Reopen in the harness")
	}
	s := h.Open(t)
	createTeams(t, s, 1)
	wantUID(t, s, "t1", 3000, 3999, 3000)
	at := t0.Add(1500 * time.Millisecond)
	_, err := s.SaveSimClock(t.Context(), at)
	mustDo(t, "SaveSimClock", err)
	id := offeringID(0, hour(-1))
	mustCommit(t, s, purchase(makeBlock("b1").on("n1", 0).obj(), "tok-1", id))

	s = h.Reopen(t, s)
	wantUID(t, s, "t1", 4000, 4999, 3000)
	got, ok, err := s.SimClock(t.Context())
	if err != nil || !ok || !got.Equal(at) {
		t.Fatalf("SimClock after reopening = %s, %v, %v; want %s", got, ok, err, at)
	}
	wantUsed(t, s, id, true)
}
