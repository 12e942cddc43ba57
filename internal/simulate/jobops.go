package simulate

import (
	"errors"
	"strings"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// Jobs in the workload: clients create jobs on their blocks and spot
// jobs on backfill, stop them, and reach for other teams' jobs; steps
// make the instances exit. The leader's pass (service.JobsOnce, in
// LeadOnce) moves them on, and the outbox starts and stops their
// instances on the simulated workloads (simworkloads.go).

// jobWorld is what the simulation knows of the jobs: the jobs it was
// told were created, and each job's state as its events tell it.
type jobWorld struct {
	ids  []string          // created, as acknowledged, in order
	team map[string]string // each job's team
	// evState is each job's state as its events tell it; evMade the
	// jobs with an event.
	evState map[string]core.JobState
}

func newJobWorld() *jobWorld {
	return &jobWorld{team: map[string]string{}, evState: map[string]core.JobState{}}
}

func isJobID(id string) bool { return strings.HasPrefix(id, "job-") }

// event takes in one event about a job.
func (j *jobWorld) event(e core.Event) {
	if st, ok := e.Data["state"].(string); ok {
		j.evState[e.Subject] = core.JobState(st)
	}
}

// opJob creates a job on one of a team's live blocks, of one to all of
// its instances.
func (w *world) opJob() {
	t := w.pickTeam()
	id := w.pickLive(func(b core.Block) bool {
		return b.Team == t.id && (b.State == core.StateActive || b.State == core.StateScheduled)
	})
	if id == "" {
		w.begin("job: %s has no live block", t.name)
		return
	}
	b := w.chk.stored[id]
	p, scope := w.caller(t)
	req := contract.JobRequest{Name: "train", BlockID: id, Command: []string{"train"},
		InstanceCount: 1 + w.rng.IntN(min(b.Count, 3)), MaxRestarts: w.rng.IntN(3)}
	w.begin("job: %s on %s (%s), %d instance(s), %d restart(s)", p.User.Name, id, b.State, req.InstanceCount, req.MaxRestarts)
	w.createJob(t, p, scope, req)
}

// opSpotJob creates a preemptible job: instances of a type on backfill,
// charged to the team at the spot price.
func (w *world) opSpotJob() {
	t := w.pickTeam()
	typ := w.fleet.Types[w.rng.IntN(len(w.fleet.Types))]
	p, scope := w.caller(t)
	req := contract.JobRequest{Name: "spot", Command: []string{"sweep"}, InstanceCount: 1 + w.rng.IntN(2),
		MaxRestarts: w.rng.IntN(2), Preemptible: true, InstanceType: typ.Name}
	if scope == "" {
		req.Team = t.id // an admin names the team it is for
	}
	w.begin("spot job: %s for %s, %d × %s", p.User.Name, t.name, req.InstanceCount, typ.Name)
	w.createJob(t, p, scope, req)
}

func (w *world) createJob(t *simTeam, p core.Principal, scope string, req contract.JobRequest) {
	kind := "job"
	if req.Preemptible {
		kind = "spot"
	}
	j, err := w.g.CreateJob(w.as(p), scope, req)
	switch {
	case err == nil:
		w.count(kind + "/created")
		w.note("created %s", j.ID)
		if j.Team != t.id {
			w.fail("job %s created for %s belongs to %s", j.ID, t.name, w.teamName(j.Team))
		}
		w.jobs.ids = append(w.jobs.ids, j.ID)
		w.jobs.team[j.ID] = j.Team
	case injected(err):
		w.count(kind + "/fault")
		w.note("fault: %v", err) // stored or not: the leader runs it either way
	case errors.Is(err, core.ErrInvalidState), errors.Is(err, core.ErrBudgetExceeded), errors.Is(err, core.ErrQuotaExceeded),
		errors.Is(err, core.ErrNoCapacity), errors.Is(err, core.ErrConflict), errors.Is(err, core.ErrInvalidArgument):
		w.count(kind + "/refused/" + reason(err))
		w.note("refused: %v", err)
	default:
		w.must(err)
	}
}

// pickJob is a job the simulation created, or "".
func (w *world) pickJob() string {
	if len(w.jobs.ids) == 0 {
		return ""
	}
	return w.jobs.ids[w.rng.IntN(len(w.jobs.ids))]
}

// opStopJob stops a job as its team would.
func (w *world) opStopJob() {
	id := w.pickJob()
	if id == "" {
		w.begin("stop job: no job")
		return
	}
	t := w.teamOf(w.jobs.team[id])
	p, scope := w.caller(t)
	w.begin("stop job %s: %s", id, p.User.Name)
	j, err := w.g.StopJob(w.as(p), scope, id)
	switch {
	case err == nil:
		w.count("job/stopped")
		w.note("now %s", j.State)
	case injected(err):
		w.count("job/stop-fault")
		w.note("fault: %v", err)
	case errors.Is(err, core.ErrInvalidState), errors.Is(err, core.ErrConflict):
		w.count("job/stop-refused/" + reason(err))
		w.note("refused: %v", err)
	default:
		w.must(err)
	}
}

// opInstanceExit ends a running instance as its program would: it
// succeeds mostly, fails or crashes sometimes; one told to stop heeds
// its SIGTERM.
func (w *world) opInstanceExit() {
	live := w.wl.running()
	if len(live) == 0 {
		w.begin("instance exit: none runs")
		return
	}
	k := live[w.rng.IntN(len(live))]
	code, why := 0, "succeeds"
	switch r := w.rng.IntN(20); {
	case w.wl.live[k].stopped:
		code, why = 143, "heeds its SIGTERM"
	case r < 4:
		code, why = 1, "fails"
	case r < 6:
		code, why = 139, "crashes"
	}
	w.begin("instance %s %s (exit %d)", k, why, code)
	w.count("instance/exit")
	w.wl.exit(k, code, "")
}

// opJobIsolation has a member reach for another team's job: reading or
// stopping it is answered not found, reading it in the other team's
// scope is forbidden, a job on the other team's block is refused, and
// the member's list of jobs holds its team's only (DESIGN.md,
// invariant 5).
func (w *world) opJobIsolation() {
	id := w.pickJob()
	t := w.pickTeam()
	if id == "" || w.jobs.team[id] == t.id || t.disabled {
		w.begin("job isolation: no other team's job")
		return
	}
	owner := w.jobs.team[id]
	w.begin("job isolation: %s reaches for job %s of %s", t.member.User.Name, id, w.teamName(owner))
	w.count("job/isolation")
	ctx := w.as(t.member)
	if _, err := w.g.GetJob(ctx, t.id, id); !errors.Is(err, core.ErrNotFound) && !injected(err) {
		w.fail("%s read job %s of another team: %v; want not found", t.member.User.Name, id, err)
	}
	if _, err := w.g.StopJob(ctx, t.id, id); !errors.Is(err, core.ErrNotFound) && !injected(err) {
		w.fail("%s stopped job %s of another team: %v; want not found", t.member.User.Name, id, err)
	}
	if _, err := w.g.GetJob(ctx, owner, id); !errors.Is(err, core.ErrForbidden) {
		w.fail("%s read job %s in another team's scope: %v; want forbidden", t.member.User.Name, id, err)
	}
	if b := w.pickLive(func(b core.Block) bool { return b.Team == owner }); b != "" {
		req := contract.JobRequest{BlockID: b, Command: []string{"steal"}, InstanceCount: 1}
		if j, err := w.g.CreateJob(ctx, t.id, req); !errors.Is(err, core.ErrNotFound) && !injected(err) {
			w.fail("%s made a job on %s of another team: %v (%s); want not found", t.member.User.Name, b, err, j.ID)
		}
	}
	jobs, err := w.g.ListJobs(ctx, t.id)
	if injected(err) {
		return
	}
	w.must(err)
	for _, j := range jobs {
		if j.Team != t.id {
			w.fail("%s's list of jobs holds %s of another team", t.member.User.Name, j.ID)
		}
	}
}
