package kube

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"capblock/internal/backend/kubernetes"
	"capblock/internal/client"
	"capblock/internal/kubetest"
	"capblock/internal/store/pgtest"
)

// TestSoakLeaderKills takes 200 blocks through their lives on the
// Kubernetes engine, with two replicas on PostgreSQL, while the leader
// is killed (SIGKILL) every 20 s and started again: the simulated clock
// moves half an hour a step (every 1.5 s) over 30 hours, and some blocks are
// cancelled on the way. At the end no node carries the label of a block
// that is over, and every active block's nodes carry its label.
func TestSoakLeaderKills(t *testing.T) {
	if testing.Short() {
		t.Skip("builds capblock and runs two replicas on PostgreSQL and a Kubernetes control plane for minutes")
	}
	c := startCluster(t) // first: without the binaries it skips, or fails under CI=true
	bin := buildBinary(t)
	dsn := pgtest.Start(t).NewDatabase(t)
	dir := t.TempDir()
	kubeconfig := c.applyRights(t, dir)
	tokenFile := filepath.Join(dir, "admin.token")
	simNow := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	flags := func(at time.Time) []string {
		return []string{"--db", dsn, "--sim-clock", "--sim-start", at.Format(time.RFC3339), "--rate-limit", "0", "--engine-poll", "1s",
			"--backend", "kubernetes", "--kubeconfig", kubeconfig, "--kube-job-image", "trainer:1",
			"--admin-token-file", tokenFile, "--secrets-key-file", filepath.Join(dir, "secrets.key")}
	}
	rs := []*server{newServer(t, bin, t.TempDir(), flags(simNow)...), newServer(t, bin, t.TempDir(), flags(simNow)...)}
	rs[0].start()
	waitMetric(t, rs[0].url, "capblock_reconciler_leader", 1)
	rs[1].start()
	token, err := os.ReadFile(tokenFile)
	must(t, err)
	clientOf := func(s *server) *client.Client {
		cl, err := client.New(s.url, client.WithToken(strings.TrimSpace(string(token))))
		must(t, err)
		return cl
	}
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(24, 20))

	// 1. 200 blocks of one or two nodes, one or two hours each, over the
	// first 40 hours.
	var bought []client.Block
	for i := 0; len(bought) < 200 && i < 600; i++ {
		count, hours := 1+rng.IntN(2), 1+rng.IntN(2)
		after := simNow.Add(time.Duration(1+rng.IntN(39)) * time.Hour)
		offers, err := clientOf(rs[0]).Offerings(ctx, client.OfferingsQuery{InstanceTypes: []string{"h100.8x"}, InstanceCount: count,
			DurationHours: hours, StartAfter: after, EndBefore: after.Add(time.Duration(hours+3) * time.Hour), MaxResults: 1})
		must(t, err)
		if len(offers) == 0 {
			continue
		}
		blk, err := clientOf(rs[0]).Buy(ctx, client.BuyRequest{OfferingID: offers[0].OfferingID, ClientToken: fmt.Sprintf("soak-%d", i)})
		must(t, err)
		bought = append(bought, blk)
	}
	if len(bought) < 200 {
		t.Fatalf("bought %d blocks, want 200", len(bought))
	}

	// 2. Half an hour a step, through one replica (the clock is shared);
	// the leader is killed every 20 s, and started again.
	lastKill, kills, cancelled := time.Now(), 0, 0
	for step := 0; simNow.Before(time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)); step++ {
		simNow = simNow.Add(30 * time.Minute)
		_, err := clientOf(rs[0]).SetClock(ctx, simNow)
		must(t, err)
		if step%2 == 0 { // some blocks are cancelled, scheduled or active
			b := bought[rng.IntN(len(bought))]
			if _, err := clientOf(rs[0]).CancelBlock(ctx, b.ID); err == nil {
				cancelled++
			}
		}
		if time.Since(lastKill) >= 20*time.Second {
			i := leaderIndex(t, rs)
			rs[i].kill()
			kills++
			rs[i].flags = flags(simNow)
			rs[i].start()
			lastKill = time.Now()
			t.Logf("killed the leader (replica %d) at %s, and started it again", i, simNow.Format("Jan 2 15:04"))
		}
		time.Sleep(1500 * time.Millisecond)
	}
	t.Logf("%d blocks, %d cancels taken, %d leader kills", len(bought), cancelled, kills)

	// 3. The labels end as the blocks' states say.
	key := func(id string) string { return kubernetes.DefaultBlockLabelDomain + "/" + id }
	var active, over int
	kubetest.Eventually(t, "every node carries exactly the labels of its active blocks", func() (bool, error) {
		want := map[string]map[string]string{} // node → label → team
		active, over = 0, 0
		for _, b := range bought {
			got, err := clientOf(rs[0]).Block(ctx, b.ID)
			if err != nil {
				return false, err
			}
			if got.State != "active" {
				over++
				continue
			}
			active++
			st, err := clientOf(rs[0]).BlockStatus(ctx, b.ID)
			if err != nil {
				return false, err
			}
			for _, p := range st.Placements {
				if want[p.Node] == nil {
					want[p.Node] = map[string]string{}
				}
				want[p.Node][key(b.ID)] = got.Team
			}
		}
		list, err := c.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, n := range list.Items {
			have := map[string]string{}
			for k, v := range n.Labels {
				if strings.HasPrefix(k, kubernetes.DefaultBlockLabelDomain+"/") {
					have[k] = v
				}
			}
			if !mapsEqual(have, want[n.Name]) {
				return false, fmt.Errorf("node %s carries %v, want %v", n.Name, sortedKeys(have), sortedKeys(want[n.Name]))
			}
		}
		return true, nil
	})
	t.Logf("at the end: %d blocks active, %d scheduled or over", active, over)
	if active == 0 {
		t.Fatal("no block is active at the end: the check of their labels proves nothing")
	}
}

// leaderIndex is the replica that reports itself leading.
func leaderIndex(t *testing.T, rs []*server) int {
	t.Helper()
	for range 200 {
		for i, s := range rs {
			if s.cmd == nil {
				continue
			}
			if v, err := readMetric(s.url, "capblock_reconciler_leader"); err == nil && v == 1 {
				return i
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no replica leads")
	return -1
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
