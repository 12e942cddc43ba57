package slurm_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/backend/slurm"
	"capblock/internal/clock"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/fleet"
	"capblock/internal/service"
	"capblock/internal/slurmtest"
	"capblock/internal/store/sqlite"
)

// TestService runs the service over SQLite on a real Slurm, on a
// simulated clock that starts at this hour: a 2-node block bought is a
// reservation of its nodes, window and team's users from the purchase;
// extended once active, the reservation's end moves; a node set DOWN in
// Slurm is recorded unhealthy from the engine, the block is moved and
// the reservation's nodes follow; at the end the reservation is gone.
func TestService(t *testing.T) {
	t.Setenv("TZ", slurmtest.DefaultTZ)
	c := slurmtest.Start(t, slurmtest.Options{Nodes: 3, Features: func(i int) []string {
		return []string{"rack=r" + string(rune('1'+i/2))}
	}})
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "capblock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	teamName := func(ctx context.Context, id string) (string, error) {
		team, err := st.Team(ctx, id)
		return team.Name, err
	}
	be := newBackend(t, c, slurm.Config{Teams: map[string]slurm.Access{"ml": {Users: []string{"nobody", "daemon"}}}, TeamName: teamName})
	t0 := time.Now().UTC().Truncate(time.Hour)
	sim := clock.NewSim(t0)
	svc, err := service.New(ctx, service.Config{Fleet: fleet.Demo(), Store: st, Backend: be, Clock: sim,
		Log: slog.New(slog.DiscardHandler), EnginePoll: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range svc.Fleet().Nodes {
		names = append(names, n.Name)
	}
	if diff := cmp.Diff(c.Nodes, names); diff != "" {
		t.Fatalf("the service's nodes (-Slurm's +service's):\n%s", diff)
	}
	// 1. Bought: the reservation holds the block's nodes for its window.
	team, b := runAndBuy(t, svc, t0, "slurm-1")
	want := shown{Nodes: hostlist(t, c, blockNodes(b)), Start: b.Start, End: b.End, Users: "daemon,nobody", Accounts: "(null)",
		Flags: "IGNORE_JOBS,SPEC_NODES", State: "INACTIVE"}
	reservationIs(t, c, b.ID, want, "the purchase")

	// 2. Active, then extended by an hour: the end moves.
	if _, err := sim.Advance(time.Hour); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the block is active", func() bool { return state(t, svc, team.ID, b.ID) == core.StateActive })
	exts, err := svc.ExtensionOfferings(ctx, team.ID, b.ID, time.Hour)
	if err != nil || len(exts) == 0 {
		t.Fatalf("extension offerings: %v, %v", exts, err)
	}
	x, err := svc.Extend(ctx, team.ID, b.ID, exts[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	b = x.Block
	want.End = b.End
	reservationIs(t, c, b.ID, want, "the extension")

	// 3. One of its nodes DOWN in Slurm: unhealthy from the engine, the
	// block moved to the free node, and its reservation with it.
	down := b.Placements[0].Node
	c.Scontrol(t, "update", "NodeName="+down, "State=DOWN", "Reason=test")
	eventually(t, "the block is moved off the down node", func() bool {
		b, err = svc.GetBlock(ctx, team.ID, b.ID)
		return err == nil && !slices.Contains(blockNodes(b), down)
	})
	for _, v := range svc.Nodes() {
		if v.Node.Name == down && (v.Record.Health != core.Unhealthy || v.Record.Source != core.HealthFromEngine || !strings.HasPrefix(v.Record.Reason, "DOWN: test")) {
			t.Errorf("the down node's record: %+v, want unhealthy from the engine, DOWN: test", v.Record)
		}
	}
	want.Nodes = hostlist(t, c, blockNodes(b))
	reservationIs(t, c, b.ID, want, "the replacement")

	// 4. Its end: the reservation is gone.
	if _, err := sim.Advance(b.End.Sub(sim.Now())); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the reservation is deleted at the block's end", func() bool {
		_, ok := reservation(t, c, b.ID)
		return !ok
	})
	if got := state(t, svc, team.ID, b.ID); got != core.StateExpired {
		t.Errorf("the block is %s at its end, want expired", got)
	}
}

// reservationIs waits until Slurm shows reservation id as want.
func reservationIs(t *testing.T, c *slurmtest.Cluster, id string, want shown, after string) {
	t.Helper()
	var got shown
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, _ = reservation(t, c, id)
		if cmp.Equal(want, got) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reservation after %s (-want +got):\n%s", after, cmp.Diff(want, got))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// hostlist is Slurm's own compressed form of nodes, as scontrol prints
// a reservation's.
func hostlist(t *testing.T, c *slurmtest.Cluster, nodes []string) string {
	t.Helper()
	out, err := c.Run(t.Context(), "", "scontrol", "show", "hostlistsorted", strings.Join(nodes, ","))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

func blockNodes(b core.Block) []string {
	var nodes []string
	for _, p := range b.Placements {
		nodes = append(nodes, p.Node)
	}
	return nodes
}

func state(t *testing.T, svc *service.Service, team, id string) core.BlockState {
	t.Helper()
	b, err := svc.GetBlock(t.Context(), team, id)
	if err != nil {
		t.Fatal(err)
	}
	return b.State
}

// runAndBuy runs svc until the test ends, makes the team "ml" and buys it
// a block of 2 h100.8x for 2 hours from t0+1h, with client token token.
func runAndBuy(t *testing.T, svc *service.Service, t0 time.Time, token string) (core.Team, core.Block) {
	t.Helper()
	ctx := t.Context()
	team, err := svc.CreateTeam(ctx, "ml")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); svc.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-ran })
	offs, err := svc.Offerings(ctx, core.SearchRequest{Types: []string{"h100.8x"}, Count: 2, Duration: 2 * time.Hour,
		StartAfter: t0.Add(time.Hour), EndBefore: t0.Add(3 * time.Hour)})
	if err != nil || len(offs) == 0 {
		t.Fatalf("searching: %v, %v", offs, err)
	}
	b, _, err := svc.Purchase(ctx, contract.PurchaseRequest{Team: team.ID, OfferingID: offs[0].ID, ClientToken: token})
	if err != nil {
		t.Fatal(err)
	}
	return team, b
}
