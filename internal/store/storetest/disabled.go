package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/core"
	"capblock/internal/store"
)

// testDisabled: a team and a user are disabled and enabled again; the
// time of the first disabling is kept when disabled twice; lists show it;
// an unknown id is not found, and a disabled row survives a reopen.
func testDisabled(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	team, other := makeTeam("t1", "vision"), makeTeam("t2", "speech")
	mustDo(t, "CreateTeam", s.CreateTeam(ctx, team))
	mustDo(t, "CreateTeam", s.CreateTeam(ctx, other))
	user := makeUser("u1", "ada", "t1", core.RoleMember)
	mustDo(t, "CreateUser", s.CreateUser(ctx, user))

	first, later := t0.Add(time.Hour), t0.Add(2*time.Hour)
	mustDo(t, "SetTeamDisabled", s.SetTeamDisabled(ctx, "t1", first))
	mustDo(t, "SetTeamDisabled again", s.SetTeamDisabled(ctx, "t1", later))
	mustDo(t, "SetUserDisabled", s.SetUserDisabled(ctx, "u1", first))
	team.DisabledAt, user.DisabledAt = first, first
	wantTeams(t, s, []core.Team{other, team})
	wantUsers(t, s, "t1", []core.User{user})
	got, err := s.User(ctx, "u1")
	mustDo(t, "User", err)
	if diff := cmp.Diff(user, got, cmpOpts...); diff != "" {
		t.Errorf("User after SetUserDisabled (-want +got):\n%s", diff)
	}

	wantErr(t, "SetTeamDisabled of an unknown team", s.SetTeamDisabled(ctx, "t9", first), store.ErrNotFound)
	wantErr(t, "SetUserDisabled of an unknown user", s.SetUserDisabled(ctx, "u9", first), store.ErrNotFound)

	s = h.Reopen(t, s)
	wantTeams(t, s, []core.Team{other, team})
	mustDo(t, "SetTeamDisabled(zero)", s.SetTeamDisabled(ctx, "t1", time.Time{}))
	mustDo(t, "SetUserDisabled(zero)", s.SetUserDisabled(ctx, "u1", time.Time{}))
	team.DisabledAt, user.DisabledAt = time.Time{}, time.Time{}
	got1, err := s.Team(ctx, "t1")
	mustDo(t, "Team", err)
	if diff := cmp.Diff(team, got1, cmpOpts...); diff != "" {
		t.Errorf("Team after enabling (-want +got):\n%s", diff)
	}
	wantUsers(t, s, "t1", []core.User{user})
}
