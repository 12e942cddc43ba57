package simulate

import (
	"errors"
	"fmt"

	"capblock/internal/core"
)

// Users: an admin disables a member (one who left, or whose token
// leaked) and enables it again later. A disabled user's token no longer
// signs in, nor does any of a disabled team's, on every replica and
// after a restart; the team acts through another member meanwhile.
// Neither change goes through a commit: no fault of the store's meets
// it, and each is acknowledged when answered.

// simUser is a member that signs in with a token.
type simUser struct {
	user     core.User
	token    string
	disabled bool // as last acknowledged
}

// opUser disables the member a team acts through (the team then acts
// through another, made when it has none), or enables a disabled one
// again; one time in ten the admin tries to disable themself, which is
// refused. Then every member's token must sign in exactly when neither
// the member nor its team is disabled.
func (w *world) opUser() {
	t := w.pickTeam()
	if w.rng.IntN(10) == 0 {
		w.begin("user: the admin disables themself")
		if _, err := w.g.SetUserDisabled(w.as(w.admin), w.admin.User.ID, true); !errors.Is(err, core.ErrInvalidState) {
			w.fail("the admin disabled themself: %v; want an invalid state", err)
		}
		w.count("user/self-refused")
		w.checkSignIn()
		return
	}
	w.begin("user of %s", t.name)
	w.meetUsers(t)
	var acting, off *simUser
	for _, u := range t.users {
		switch {
		case u.disabled:
			off = u
		case u.user.ID == t.member.User.ID:
			acting = u
		}
	}
	if off != nil {
		w.note("enable %s", off.user.Name)
		w.setUserDisabled(off, false)
	} else {
		other := w.otherMember(t, acting)
		w.note("disable %s; the team acts as %s", acting.user.Name, other.user.Name)
		w.setUserDisabled(acting, true)
		t.member = core.Principal{User: other.user}
	}
	w.checkSignIn()
}

// meetUsers gives the member a team acts through a token, the first
// time opUser meets the team.
func (w *world) meetUsers(t *simTeam) {
	if len(t.users) > 0 {
		return
	}
	t.users = append(t.users, w.signedIn(t.member.User))
}

// otherMember is an enabled member of t other than u: made, with a
// token, when there is none.
func (w *world) otherMember(t *simTeam, u *simUser) *simUser {
	for _, o := range t.users {
		if o != u && !o.disabled {
			return o
		}
	}
	made, err := w.g.CreateUser(w.as(w.admin), fmt.Sprintf("%s-dev%d", t.name, len(t.users)+1), t.id, core.RoleMember)
	w.must(err)
	o := w.signedIn(made)
	t.users = append(t.users, o)
	return o
}

// signedIn makes a token for u, as the admin.
func (w *world) signedIn(u core.User) *simUser {
	_, token, err := w.g.CreateToken(w.as(w.admin), u.ID, 0)
	w.must(err)
	return &simUser{user: u, token: token}
}

// setUserDisabled disables or enables u, as the admin.
func (w *world) setUserDisabled(u *simUser, disabled bool) {
	w.count(fmt.Sprintf("user/disabled-%v", disabled))
	got, err := w.g.SetUserDisabled(w.as(w.admin), u.user.ID, disabled)
	w.must(err)
	u.disabled = disabled
	if got.ID != u.user.ID || got.DisabledAt.IsZero() == disabled {
		w.fail("user %s was set disabled %v; it answers user %s disabled at %v", u.user.Name, disabled, got.ID, got.DisabledAt)
	}
}

// checkSignIn checks that each member's token signs in as the member
// when neither it nor its team is disabled, and is refused otherwise.
func (w *world) checkSignIn() {
	for _, t := range w.teams {
		for _, u := range t.users {
			p, err := w.svc.Authenticate(w.ctx, u.token)
			switch refused := u.disabled || t.disabled; {
			case refused && !errors.Is(err, core.ErrUnauthenticated):
				w.fail("user %s (disabled %v) of team %s (disabled %v) signed in: %v; want refused", u.user.Name, u.disabled, t.name, t.disabled, err)
			case !refused && (err != nil || p.User.ID != u.user.ID):
				w.fail("user %s of team %s, both enabled, signed in as %q: %v", u.user.Name, t.name, p.User.Name, err)
			}
		}
	}
}

// checkAccountsStored checks that every team and every member met is
// stored disabled, or not, as last acknowledged.
func (w *world) checkAccountsStored() {
	for _, t := range w.teams {
		team, err := w.st.Team(w.ctx, t.id)
		if err != nil {
			w.fail("reading team %s: %v", t.name, err)
		}
		if team.DisabledAt.IsZero() == t.disabled {
			w.fail("team %s is stored disabled at %v; it was last acknowledged disabled %v", t.name, team.DisabledAt, t.disabled)
		}
		for _, u := range t.users {
			got, err := w.st.User(w.ctx, u.user.ID)
			if err != nil {
				w.fail("reading user %s: %v", u.user.Name, err)
			}
			if got.DisabledAt.IsZero() == u.disabled {
				w.fail("user %s is stored disabled at %v; it was last acknowledged disabled %v", u.user.Name, got.DisabledAt, u.disabled)
			}
		}
	}
}
