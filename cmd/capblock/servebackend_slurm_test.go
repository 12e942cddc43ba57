package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/backend/slurm"
	"capblock/internal/client"
	"capblock/internal/slurmtest"
)

// slurmFleet sells h100.8x; its one declared node is replaced by the
// Slurm cluster's at start. Team ml's jobs run as Slurm user nobody.
const slurmFleet = `currency: USD
instanceTypes:
  - {name: h100.8x, gpuModel: H100, gpusPerInstance: 8, onDemandPrice: "98.32"}
zones:
  - name: zone-a
    racks:
      - name: a-r1
        nodeGroups:
          - {name: placeholder, gpuModel: H100, gpus: 8}
slurm:
  teams:
    ml: {users: [nobody]}
`

// TestServeBadSlurmFlags: a bad flag of --backend slurm is one line
// saying what is wrong, exit status 2, before anything is opened.
func TestServeBadSlurmFlags(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string
	}{
		"no model":                  {[]string{"--backend", "slurm", "--slurm-gpu-model", "h100"}, `--slurm-gpu-model "h100": want TYPE=MODEL`},
		"a type Slurm cannot print": {[]string{"--backend", "slurm", "--slurm-gpu-model", "h:100=H100"}, `a GRES type holds no ':'`},
		"no grace":                  {[]string{"--backend", "slurm", "--slurm-grace", "0s"}, `--slurm-grace "0s": want a duration of at least 1s`},
		"a Slurm flag on the sim":   {[]string{"--slurm-zone", "a"}, `the --slurm-* flags need --backend slurm`},
		"no such transport":         {[]string{"--backend", "slurm", "--slurm-scontrol", "rest"}, `--slurm-scontrol "rest": want session or process`},
		"a Kubernetes flag on Slurm": {[]string{"--backend", "slurm", "--kubeconfig", "kube.yaml"},
			`--kubeconfig, --kube-gpu-model and --kube-rack-label need --backend kubernetes`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			db := t.TempDir() + "/capblock.db"
			got := runApp(t.Context(), nil, append([]string{"serve", "--db", db, "--listen", "127.0.0.1:0"}, tc.args...)...)
			if got.code != 2 || !strings.Contains(got.stderr, tc.want) || strings.Count(got.stderr, "\n") != 1 {
				t.Errorf("serve %v: exit %d, stderr %q; want 2 and one line with %q", tc.args, got.code, got.stderr, tc.want)
			}
			if _, err := os.Stat(db); err == nil {
				t.Errorf("serve %v created %s before refusing its flags", tc.args, db)
			}
		})
	}
}

// TestSlurmConfig: the flags of --backend slurm and the fleet file's
// slurm section reach the backend's configuration.
func TestSlurmConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, []byte(slurmFleet), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLURM_CONF", "/etc/slurm/env.conf")
	f := slurmFlags{bin: "/opt/slurm/bin", gpuModels: []string{"nvidia_h100_80gb_hbm3=H100", "=A100"}, partitions: []string{"gpu"},
		zone: "site-a", rackFeature: "rack:", zoneFeature: slurm.DefaultZoneFeature, holdUsers: []string{"capblock"}, grace: "90s",
		scontrol: slurm.ScontrolProcess}
	got, err := slurmConfig(f, path)
	if err != nil {
		t.Fatal(err)
	}
	want := slurm.Config{Conf: "/etc/slurm/env.conf", Bin: "/opt/slurm/bin", GPUModels: map[string]string{"nvidia_h100_80gb_hbm3": "H100", "": "A100"},
		Partitions: []string{"gpu"}, Zone: "site-a", RackFeature: "rack:", ZoneFeature: slurm.DefaultZoneFeature, HoldUsers: []string{"capblock"},
		Grace: 90 * time.Second, Teams: map[string]slurm.Access{"ml": {Users: []string{"nobody"}}}, Scontrol: slurm.ScontrolProcess}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	f.conf = "/etc/slurm/flag.conf"
	if got, _ := slurmConfig(f, ""); got.Conf != f.conf || got.Teams != nil {
		t.Errorf("--slurm-conf over $SLURM_CONF, no fleet file: %+v", got)
	}
}

// TestServeSlurm: serve --backend slurm on a real Slurm sells the
// cluster's nodes, and a block bought for team ml is a reservation that
// the fleet file's Slurm user of ml may use (the team found by name).
func TestServeSlurm(t *testing.T) {
	c := slurmtest.Start(t, slurmtest.Options{Nodes: 2})
	dir := t.TempDir()
	fleetFile := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(fleetFile, []byte(slurmFleet), 0o600); err != nil {
		t.Fatal(err)
	}
	api := freeAddr(t)
	runCtx, stop := context.WithCancel(t.Context())
	done := make(chan result, 1)
	go func() {
		done <- runApp(runCtx, nil, "serve", "--db", filepath.Join(dir, "capblock.db"), "--listen", api, "--log-level", "warn",
			"--fleet", fleetFile, "--sim-clock", "--engine-poll", "1s", "--backend", "slurm", "--slurm-conf", c.Conf)
	}()
	t.Cleanup(func() {
		stop()
		if r := <-done; r.code != 0 {
			t.Errorf("serve: exit %d, %s", r.code, r.stderr)
		}
	})
	// 1. Once it answers: its nodes are Slurm's.
	for {
		r, err := http.Get("http://" + api + "/healthz")
		if err == nil {
			r.Body.Close()
			break
		}
		select {
		case r := <-done:
			t.Fatalf("serve stopped: exit %d, %s", r.code, r.stderr)
		case <-time.After(100 * time.Millisecond):
		}
	}
	token, err := os.ReadFile(filepath.Join(dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New("http://"+api, client.WithToken(strings.TrimSpace(string(token))))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	nodes, err := cl.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name+" "+n.Zone+" "+n.GPUModel+" "+n.Health)
	}
	if want := []string{"sim0 capblock H100 healthy", "sim1 capblock H100 healthy"}; !cmp.Equal(want, names) {
		t.Errorf("the server's nodes: %q, want %q", names, want)
	}
	// 2. A block of team ml: its reservation is for nobody.
	hour := time.Now().UTC().Truncate(time.Hour) // the simulated clock's start
	team, err := cl.CreateTeam(ctx, "ml")
	if err != nil {
		t.Fatal(err)
	}
	offs, err := cl.Offerings(ctx, client.OfferingsQuery{InstanceTypes: []string{"h100.8x"}, InstanceCount: 1, DurationHours: 2,
		StartAfter: hour.Add(time.Hour), EndBefore: hour.Add(4 * time.Hour)})
	if err != nil || len(offs) == 0 {
		t.Fatalf("offerings: %v, %v", offs, err)
	}
	b, err := cl.Buy(ctx, client.BuyRequest{OfferingID: offs[0].OfferingID, ClientToken: "t1", Team: team.ID})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := c.Run(ctx, "", "scontrol", "--oneliner", "show", "reservation", b.ID)
		if err == nil && strings.Contains(string(out), " Users=nobody ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("block %s's reservation for nobody: %s %v", b.ID, out, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
