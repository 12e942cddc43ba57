package kube

import (
	"bufio"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"capblock/internal/backend/kubernetes"
	"capblock/internal/client"
	"capblock/internal/kubetest"
	"capblock/internal/store/pgtest"
)

// TestPausedLeader pauses the leading replica (SIGSTOP) while its
// activation of a block is in flight, held in the API server by a
// webhook that holds every write of the first replica's ServiceAccount
// to the block's nodes; the other replica (another ServiceAccount) takes
// the lease, activates, cancels and releases the block; then the old
// leader's held writes land, and it resumes. The nodes end without the
// block's label, and none of the old leader's writes of a block's labels
// took effect.
func TestPausedLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("builds capblock and runs two replicas on PostgreSQL and a Kubernetes control plane")
	}
	c := startCluster(t) // first: without the binaries it skips, or fails under CI=true
	bin := buildBinary(t)
	dsn := pgtest.Start(t).NewDatabase(t)
	dir := t.TempDir()
	pki := newTestPKI(t, dir)
	// The replicas run as two ServiceAccounts of the same rights, so
	// that the hold below holds the first replica's writes only.
	kubeconfigA := c.applyRights(t, dir)
	kubeconfigB := c.applyTwin(t, dir, "capblock-twin")
	tokenFile := filepath.Join(dir, "admin.token")
	flags := func(kubeconfig string) []string {
		return []string{"--db", dsn, "--sim-clock", "--sim-start", "2026-12-01T00:00:00Z", "--rate-limit", "0", "--engine-poll", "1s",
			"--backend", "kubernetes", "--kubeconfig", kubeconfig, "--kube-job-image", "trainer:1",
			"--admin-token-file", tokenFile, "--secrets-key-file", filepath.Join(dir, "secrets.key")}
	}
	a := newServer(t, bin, t.TempDir(), flags(kubeconfigA)...)
	a.start()
	waitMetric(t, a.url, "capblock_reconciler_leader", 1)
	b := newServer(t, bin, t.TempDir(), flags(kubeconfigB)...)
	b.start()
	opA, opB := newCLI(t, bin), newCLI(t, bin)
	var login struct{ User client.User }
	opA.json(&login, "login", "--url", a.url, "--token-file", tokenFile)
	opB.run("login", "--url", b.url, "--token-file", tokenFile)
	team := login.User.Team

	// 1. A block of 2 nodes from the next hour.
	var offerings struct{ Offerings []client.Offering }
	opA.json(&offerings, "offerings", "--type", "h100.8x", "--count", "2", "--duration", "4h", "--start-after", "+1h", "--end-before", "+5h")
	if len(offerings.Offerings) == 0 {
		t.Fatal("no offering of 2 h100.8x for 4 hours")
	}
	var blk client.Block
	opA.json(&blk, "buy", "1", "--name", "paused")
	nodes := c.placed(t, opA, blk.ID)
	key := kubernetes.DefaultBlockLabelDomain + "/" + blk.ID
	rcA, err := clientcmd.BuildConfigFromFlags("", kubeconfigA)
	must(t, err)
	hold := c.holdLabelsOf(t, pki, nodes, c.accountUser(), clientset.NewForConfigOrDie(rcA))
	before := metricValue(t, a.url, "capblock_engine_node_writes_total")

	// 2. The clock (shared) moves to the block's start: the leader
	// activates it; its writes are held; it is paused with them in
	// flight.
	opA.run("admin", "clock", "--advance", "1h")
	hold.waitHeld(t, 1)
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = a.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	paused := time.Now()

	// 3. The other replica takes over, activates, cancels and releases.
	waitMetric(t, b.url, "capblock_reconciler_leader", 1)
	t.Logf("the other replica leads %v after the pause", time.Since(paused).Round(time.Millisecond))
	kubetest.Eventually(t, "the new leader labels the block's nodes", func() (bool, error) {
		return cmp.Equal(labels(nodes, team), c.labelled(t, key)), nil
	})
	opB.run("blocks", "cancel", blk.ID, "--yes")
	kubetest.Eventually(t, "the block's release unlabels its nodes", func() (bool, error) { return len(c.labelled(t, key)) == 0, nil })

	// 4. The old leader's held writes land in the API server, late,
	// while it is still paused; then it resumes.
	hold.allow()
	stillUnlabelled := func(when string) {
		t.Helper()
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if got := c.labelled(t, key); len(got) != 0 {
				t.Fatalf("%s, the released block's label is back on %v", when, got)
			}
		}
	}
	stillUnlabelled("once the old leader's held writes were let through")
	resume()
	t.Logf("the old leader resumed %v after its pause", time.Since(paused).Round(time.Millisecond))
	waitMetric(t, a.url, "capblock_reconciler_leader", 0)
	stillUnlabelled("after the old leader resumed")
	after := metricValue(t, a.url, "capblock_engine_node_writes_total")
	refused := metricValue(t, a.url, "capblock_engine_stale_writes_refused_total")
	t.Logf("the old leader's writes of blocks' labels: %v before the pause, %v after it resumed; %v refused as stale", before, after, refused)
	for _, line := range linesOf(t, b.logs[0], "repair", "stale", "released", "reconciler") {
		t.Logf("new leader: %s", line)
	}
	for _, line := range linesOf(t, a.logs[0], "lease", "stale", "labelling", "activate", "reconciler", "repair") {
		t.Logf("old leader: %s", line)
	}
	if after != before {
		t.Fatalf("%v of the old leader's writes took effect after it lost the lease; want none", after-before)
	}
}

// linesOf returns the lines of file that hold any of words.
func linesOf(t *testing.T, file string, words ...string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(data)) {
		for _, w := range words {
			if strings.Contains(line, w) {
				out = append(out, strings.TrimSpace(line))
				break
			}
		}
	}
	return out
}

// waitMetric waits until the server at url reports metric name at want.
func waitMetric(t *testing.T, url, name string, want float64) {
	t.Helper()
	kubetest.Eventually(t, name+" = "+strconv.FormatFloat(want, 'g', -1, 64)+" at "+url, func() (bool, error) {
		v, err := readMetric(url, name)
		return err == nil && v == want, err
	})
}

// metricValue reads metric name from the server at url.
func metricValue(t *testing.T, url, name string) float64 {
	t.Helper()
	v, err := readMetric(url, name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func readMetric(url, name string) (float64, error) {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errMissing(name)
}

type errMissing string

func (e errMissing) Error() string { return "no metric " + string(e) }
