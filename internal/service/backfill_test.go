package service

import (
	"errors"
	"testing"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// TestBackfillJobRefusals: a preemptible job with no type, an unknown
// type or zone, a block, another team's name, or for a disabled team is
// refused, and nothing
// is stored; a good one waits, pending, with its type.
func TestBackfillJobRefusals(t *testing.T) {
	ctx := t.Context()
	svc, _, st := jobRunner(t)
	cmd := []string{"true"}
	for name, c := range map[string]struct {
		req  contract.JobRequest
		want error
	}{
		"no type":       {contract.JobRequest{Preemptible: true, Command: cmd}, core.ErrInvalidArgument},
		"unknown type":  {contract.JobRequest{Preemptible: true, InstanceType: "h200.8x", Command: cmd}, core.ErrInvalidArgument},
		"unknown zone":  {contract.JobRequest{Preemptible: true, InstanceType: "h100.8x", Zone: "mars", Command: cmd}, core.ErrInvalidArgument},
		"on a block":    {contract.JobRequest{Preemptible: true, InstanceType: "h100.8x", BlockID: "cb-a", Command: cmd}, core.ErrInvalidArgument},
		"too many":      {contract.JobRequest{Preemptible: true, InstanceType: "h100.8x", InstanceCount: 1000, Command: cmd}, core.ErrInvalidArgument},
		"another team":  {contract.JobRequest{Preemptible: true, InstanceType: "h100.8x", Team: "other", Command: cmd}, core.ErrNotFound},
		"type on block": {contract.JobRequest{BlockID: "cb-a", InstanceType: "h100.8x", Command: cmd}, core.ErrInvalidArgument},
	} {
		if _, err := svc.CreateJob(ctx, "t", c.req); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	if _, err := svc.CreateJob(ctx, "", contract.JobRequest{Preemptible: true, InstanceType: "h100.8x", Command: cmd}); !errors.Is(err, core.ErrInvalidArgument) {
		t.Errorf("an admin naming no team: %v, want invalid", err)
	}
	// Spot time for a disabled team is not sold.
	if err := st.CreateTeam(ctx, core.Team{ID: "off", Name: "off", CreatedAt: svc.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetTeamDisabled(ctx, "off", svc.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateJob(ctx, "off", contract.JobRequest{Preemptible: true, InstanceType: "h100.8x", Command: cmd}); !errors.Is(err, core.ErrInvalidState) {
		t.Errorf("a disabled team: %v, want invalid state", err)
	}
	if js, err := st.ListJobs(ctx, "", false); err != nil || len(js) != 0 {
		t.Fatalf("refused jobs stored: %v %v", js, err)
	}
	j, err := svc.CreateJob(ctx, "t", contract.JobRequest{Preemptible: true, InstanceType: "h100.8x", Command: cmd})
	if err != nil || !j.Preemptible || j.Team != "t" || j.InstanceCount != 1 || j.State != core.JobPending || j.BlockID != "" {
		t.Fatalf("a preemptible job: %+v, %v", j, err)
	}
}

// TestLendingRefusals: another team's block is not found, a block that
// is no longer live does not lend; nothing changes. The holder turns
// lending on and off.
func TestLendingRefusals(t *testing.T) {
	ctx := t.Context()
	svc, _, st := jobRunner(t)
	if _, err := svc.SetLending(ctx, "other", "cb-a", true); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("another team's block: %v, want not found", err)
	}
	if _, err := svc.SetLending(ctx, "t", "cb-none", true); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("an unknown block: %v, want not found", err)
	}
	b, err := st.GetBlock(ctx, "cb-a")
	if err != nil || b.Lending || b.Version != 1 {
		t.Fatalf("refusals changed the block: %+v %v", b, err)
	}
	on, err := svc.SetLending(ctx, "t", "cb-a", true)
	if err != nil || !on.Lending {
		t.Fatalf("lending on: %+v %v", on, err)
	}
	off, err := svc.SetLending(ctx, "", "cb-a", false) // an admin
	if err != nil || off.Lending {
		t.Fatalf("lending off: %+v %v", off, err)
	}
	ended := off
	ended.State = core.StateExpired
	if err := st.Commit(ctx, store.Change{Update: []store.BlockUpdate{{Block: ended, ExpectedVersion: off.Version}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetLending(ctx, "t", "cb-a", true); !errors.Is(err, core.ErrInvalidState) {
		t.Errorf("an expired block: %v, want invalid state", err)
	}
}
