package slurm

import (
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestParseReservation reads a reservation that a real Slurm 22.05
// printed (slurmtest; in UTC+05:30, read here as the backend's TZ=UTC
// would have printed it: only the wall-clock digits matter).
func TestParseReservation(t *testing.T) {
	data, err := os.ReadFile("testdata/reservation-22.05.txt")
	if err != nil {
		t.Fatal(err)
	}
	recs := parseRecords(string(data))
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	got, err := parseReservation(recs[0])
	if err != nil {
		t.Fatal(err)
	}
	want := reservation{name: "cb-x", nodes: []string{"sim0", "sim3"},
		start: time.Date(2026, 12, 2, 0, 40, 11, 0, time.UTC), end: time.Date(2026, 12, 2, 1, 40, 11, 0, time.UTC),
		users: []string{"nobody", "root"}, flags: []string{"IGNORE_JOBS", "SPEC_NODES"}, active: true}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(reservation{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestUpdateArgs: only what differs is sent; a started reservation's
// start and a passed end are not; new nodes carry IGNORE_JOBS; an
// emptied list is emptied with Slurm's removals.
func TestUpdateArgs(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(h int) time.Time { return now.Add(time.Duration(h) * time.Hour) }
	base := reservation{name: "cb-1", nodes: []string{"a", "b"}, start: at(2), end: at(6), users: []string{"alice"}}
	with := func(f func(r *reservation)) reservation {
		r := base
		f(&r)
		return r
	}
	tests := map[string]struct {
		have, want reservation
		args       []string
	}{
		"the same":          {have: base, want: base},
		"a replaced node":   {have: base, want: with(func(r *reservation) { r.nodes = []string{"a", "c"} }), args: []string{"Nodes=a,c", "Flags=IGNORE_JOBS"}},
		"on part of a node": {have: base, want: with(func(r *reservation) { r.nodes = []string{"c"}; r.overlap = true }), args: []string{"Nodes=c", "Flags=IGNORE_JOBS,OVERLAP"}},
		"extended":          {have: base, want: with(func(r *reservation) { r.end = at(8) }), args: []string{"EndTime=2026-12-01T18:00:00"}},
		"moved before its start": {have: base, want: with(func(r *reservation) { r.start, r.end = at(3), at(7) }),
			args: []string{"StartTime=2026-12-01T13:00:00", "EndTime=2026-12-01T17:00:00"}},
		"started: its start stays":          {have: with(func(r *reservation) { r.active = true; r.start = at(-1) }), want: with(func(r *reservation) { r.start = at(-2) })},
		"a start that passed while waiting": {have: base, want: with(func(r *reservation) { r.start = at(-1) }), args: []string{"StartTime=now"}},
		"an end that passed":                {have: base, want: with(func(r *reservation) { r.end = at(-1) })},
		"other users":                       {have: base, want: with(func(r *reservation) { r.users = []string{"bob", "carol"} }), args: []string{"Users=bob,carol"}},
		"accounts instead of users": {have: base, want: with(func(r *reservation) { r.users = nil; r.accounts = []string{"ml"} }),
			args: []string{"Users=-alice", "Accounts=ml"}},
		"a later version": {have: with(func(r *reservation) { r.version, r.versioned = 3, true }),
			want: with(func(r *reservation) { r.version, r.versioned = 4, true }), args: []string{"BurstBuffer=capblock:v=4"}},
		"no version recorded yet": {have: base, want: with(func(r *reservation) { r.version, r.versioned = 4, true }),
			args: []string{"BurstBuffer=capblock:v=4"}},
		"the same version": {have: with(func(r *reservation) { r.version, r.versioned = 4, true }),
			want: with(func(r *reservation) { r.version, r.versioned = 4, true })},
		"versions kept in memory": {have: base, want: with(func(r *reservation) { r.version = 4 })},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.args, updateArgs(tc.have, tc.want, now)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseJobs(t *testing.T) {
	got := parseJobs("12|RUNNING|2026-12-01T20:03:30\n13|PENDING|N/A\n\n")
	want := []resvJob{{id: "12", state: "RUNNING", end: time.Date(2026, 12, 1, 20, 3, 30, 0, time.UTC)}, {id: "13", state: "PENDING"}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(resvJob{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestParseVersion: only a BurstBuffer field that capblock wrote holds a
// version.
func TestParseVersion(t *testing.T) {
	type got struct {
		V  int64
		OK bool
	}
	tests := map[string]got{
		"capblock:v=7":  {7, true},
		"capblock:v=0":  {0, true},
		"(null)":        {},
		"":              {},
		"capblock:v=x":  {},
		"datawarp:10GB": {},
	}
	for field, want := range tests {
		v, ok := parseVersion(field)
		if diff := cmp.Diff(want, got{v, ok}); diff != "" {
			t.Errorf("%q (-want +got):\n%s", field, diff)
		}
	}
	if v, ok := parseVersion(versionArg(12)[len("BurstBuffer="):]); v != 12 || !ok {
		t.Errorf("versionArg(12) reads back as %d, %v", v, ok)
	}
}
