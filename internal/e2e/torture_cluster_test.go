package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	mathrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"capblock/internal/store/pgtest"
	"capblock/internal/testproc"
)

// tortureCluster is `capblock serve` replicas on one PostgreSQL
// database, each slot kept running by a keeper that starts its replica
// again, after a pause, whenever it dies; and the faults done to them.
type tortureCluster struct {
	t    *testing.T
	pg   *pgtest.Server
	dsn  string
	dir  string // the replicas' files: token, secrets key, jobs, logs
	args []string
	stop chan struct{}
	wg   sync.WaitGroup

	mu         sync.Mutex
	rng        *mathrand.Rand
	running    []*tortureReplica // by slot; nil while down
	all        []*tortureReplica // every start
	starts     int               // replicas started, the first ones included
	failed     int               // starts that never listened (PostgreSQL down, most likely)
	kills      int
	pgRestarts int
	exits      []string // replicas that died unasked: which, and the end of their log
}

// tortureReplica is one start of a slot's replica.
type tortureReplica struct {
	slot, n int
	cmd     *exec.Cmd
	log     string
	url     string        // once it listens; guarded by the cluster's mu
	since   time.Time     // when it began to listen
	done    chan struct{} // closed once it has exited and been reaped
	killed  atomic.Bool   // it was killed on purpose
}

// listening reports whether r (nil while its slot is down) listens
// and is neither dead nor dying. Callers hold the cluster's mu.
func (r *tortureReplica) listening() bool {
	return r != nil && r.url != "" && !r.exited() && !r.killed.Load()
}

func (r *tortureReplica) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// startTortureCluster starts n replicas of the server on fleetYAML, on a
// PostgreSQL server of the test's own (which it restarts), with
// simulated clocks at t0; each is kept running until the test ends.
func startTortureCluster(t *testing.T, n int, fleetYAML string, seed uint64) *tortureCluster {
	t.Helper()
	c := &tortureCluster{t: t, pg: pgtest.Start(t), dir: t.TempDir(), stop: make(chan struct{}),
		rng: mathrand.New(mathrand.NewPCG(seed, 1)), running: make([]*tortureReplica, n)}
	c.dsn = c.pg.NewDatabase(t)
	// The server sets nothing of its own: a commit it acknowledges must
	// survive a crash of PostgreSQL, as with PostgreSQL's defaults
	// (pgtest turns synchronous commits off for speed).
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET synchronous_commit = on', current_database()); END $$`)
	conn.Close(ctx)
	if err != nil {
		t.Fatalf("turning synchronous commits on: %v", err)
	}
	fleetFile := filepath.Join(c.dir, "fleet.yaml")
	if err := os.WriteFile(fleetFile, []byte(fleetYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := buildBinary(t)
	c.args = []string{bin, "serve", "--db", c.dsn, "--listen", "127.0.0.1:0", "--fleet", fleetFile,
		"--sim-clock", "--sim-start", ts(t0), "--rate-limit", "0",
		"--admin-token-file", filepath.Join(c.dir, "admin.token"), "--secrets-key-file", filepath.Join(c.dir, "secrets.key"),
		"--jobs-dir", filepath.Join(c.dir, "jobs"), "--allow-unisolated-jobs"}
	t.Cleanup(func() { testproc.KillUnder(c.dir) })
	t.Cleanup(c.shutdown)
	// One at a time: the first start writes the token and the key that
	// the others read.
	for slot := range n {
		r, err := c.start(slot)
		if err != nil {
			t.Fatal(err)
		}
		c.wg.Go(func() { c.keep(r) })
	}
	return c
}

// start starts slot's replica and waits until it says where it listens.
func (c *tortureCluster) start(slot int) (*tortureReplica, error) {
	c.mu.Lock()
	c.starts++
	r := &tortureReplica{slot: slot, n: c.starts, done: make(chan struct{})}
	c.mu.Unlock()
	r.log = filepath.Join(c.dir, fmt.Sprintf("replica-%d.%03d.log", slot, r.n))
	f, err := os.Create(r.log)
	if err != nil {
		return nil, err
	}
	r.cmd = exec.Command(c.args[0], c.args[1:]...)
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the test, whatever happens
	stderr, err := r.cmd.StderrPipe()
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := r.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting replica %d: %w", slot, err)
	}
	c.mu.Lock()
	c.running[slot] = r // from now on shutdown kills it
	c.all = append(c.all, r)
	c.mu.Unlock()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			line := sc.Bytes()
			f.Write(append(line, '\n'))
			if m := listenLine.FindSubmatch(line); m != nil {
				select {
				case found <- string(m[1]):
				default:
				}
			}
		}
		f.Close()
		_ = r.cmd.Wait()
		close(r.done)
	}()
	fail := func(why string) (*tortureReplica, error) {
		r.killed.Store(true)
		_ = r.cmd.Process.Kill()
		<-r.done
		c.mu.Lock()
		c.failed++
		c.running[slot] = nil
		c.mu.Unlock()
		return nil, fmt.Errorf("replica %d (start %d) %s:\n%s", slot, r.n, why, logTail(r.log, 10))
	}
	select {
	case url := <-found:
		c.mu.Lock()
		r.url, r.since = url, time.Now()
		c.mu.Unlock()
		return r, nil
	case <-r.done:
		return fail("exited before it listened")
	case <-time.After(30 * time.Second):
		return fail("did not listen within 30s")
	}
}

// keep waits for r to die and starts its slot's replica again, after a
// pause, until the cluster stops.
func (c *tortureCluster) keep(r *tortureReplica) {
	for {
		select {
		case <-r.done:
		case <-c.stop:
			return
		}
		c.mu.Lock()
		c.running[r.slot] = nil
		if !r.killed.Load() {
			c.exits = append(c.exits, fmt.Sprintf("replica %d (start %d) exited by itself; its log ends:\n%s", r.slot, r.n, logTail(r.log, 15)))
		}
		pause := 200*time.Millisecond + time.Duration(c.rng.Int64N(int64(time.Second)))
		c.mu.Unlock()
		var next *tortureReplica
		for next == nil {
			select {
			case <-time.After(pause):
			case <-c.stop:
				return
			}
			started, err := c.start(r.slot)
			if err != nil {
				c.t.Logf("%v", err)
				pause = 500 * time.Millisecond
				continue
			}
			next = started
		}
		r = next
	}
}

// pick returns the URL of a random replica that listens and runs, or
// "" when there is none.
func (c *tortureCluster) pick(rng *mathrand.Rand) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var urls []string
	for _, r := range c.running {
		if r.listening() {
			urls = append(urls, r.url)
		}
	}
	if len(urls) == 0 {
		return ""
	}
	return urls[rng.IntN(len(urls))]
}

// name names the replica at url: its slot and start number.
func (c *tortureCluster) name(url string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.all {
		if r.url == url {
			return r.name()
		}
	}
	return url
}

func (r *tortureReplica) name() string { return fmt.Sprintf("replica %d.%d", r.slot, r.n) }

// listeningSince returns when the replica of that name began to listen.
func (c *tortureCluster) listeningSince(name string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.all {
		if r.name() == name && r.url != "" {
			return r.since, true
		}
	}
	return time.Time{}, false
}

// up returns the URLs of the replicas that listen and run.
func (c *tortureCluster) up() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var urls []string
	for _, r := range c.running {
		if r.listening() {
			urls = append(urls, r.url)
		}
	}
	return urls
}

// killOne kills a random replica that listens with SIGKILL, and returns
// its slot, or -1 when none listens.
func (c *tortureCluster) killOne() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var up []*tortureReplica
	for _, r := range c.running {
		if r.listening() {
			up = append(up, r)
		}
	}
	if len(up) == 0 {
		return -1
	}
	r := up[c.rng.IntN(len(up))]
	r.killed.Store(true)
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return -1
	}
	c.kills++
	return r.slot
}

// restartPostgres crashes PostgreSQL and starts it again after down.
func (c *tortureCluster) restartPostgres(down time.Duration) error {
	if err := c.pg.Restart(down); err != nil {
		return err
	}
	c.mu.Lock()
	c.pgRestarts++
	c.mu.Unlock()
	return nil
}

// waitAllUp waits until every slot's replica listens.
func (c *tortureCluster) waitAllUp(ctx context.Context) error {
	for len(c.up()) < len(c.running) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d replicas up: %w", len(c.up()), len(c.running), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// stopped reports whether the cluster has been shut down.
func (c *tortureCluster) stopped() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// shutdown stops the keepers and kills every replica.
func (c *tortureCluster) shutdown() {
	if c.stopped() {
		return
	}
	close(c.stop)
	c.wg.Wait()
	c.mu.Lock()
	running := append([]*tortureReplica(nil), c.running...)
	c.mu.Unlock()
	for _, r := range running {
		if r != nil {
			r.killed.Store(true)
			_ = r.cmd.Process.Kill()
			<-r.done
		}
	}
}

// logTail returns the last n lines of the file at path.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(testproc.Tail(bytes.TrimRight(data, "\n"), n))
}
