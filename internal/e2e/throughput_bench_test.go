package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"capblock/internal/fleet"
)

// benchProfiles, when set (CAPBLOCK_BENCH_PROFILES=DIR), is where
// BenchmarkPurchasesThroughAPI writes the server's CPU profiles, taken
// through serve --debug-listen while its clients buy: a profile of one
// second after another, ROW-NNN.pprof, for as long as a row runs
// (go tool pprof -top DIR/ROW-*.pprof merges them).
var benchProfiles = os.Getenv("CAPBLOCK_BENCH_PROFILES")

// BenchmarkPurchasesThroughAPI measures purchases per second through the
// HTTP API of one `capblock serve` process (SQLite, durable), 16 clients,
// each purchase a search for one instance over an exact window and the
// purchase of the offering it returns, at random starts over 8 weeks:
//
//   - demo fleet, l4.1x (1 GPU) for 1–4 hours, blocks 0 → 3,000;
//   - demo fleet, h100.8x (a whole node) for 1–4 hours, 3,000 → 6,000;
//   - 10,000 nodes (4 zones × 50 racks × 50 nodes of 8 H100), h100.8x
//     for 1–48 hours, the first 3,000 blocks;
//   - the same, the last 10,000 of 100,000 (the first 90,000 written
//     into the database before the server starts, by seedPurchases);
//
// and how long a restart with those 100,000 blocks takes to answer its
// first search. Each purchase row is a fixed workload (its op is the whole
// row): run it with -benchtime 1x and read purchases/s; a row whose
// server is not at its starting count (run alone, or again under -count)
// gets a fresh server with that count seeded. The servers and the clients
// share the machine's cores, so each row also reports the CPU time the
// server and the clients spent per purchase.
func BenchmarkPurchasesThroughAPI(b *testing.B) {
	if testing.Short() {
		b.Skip("builds and runs the server binary")
	}
	bin := buildBinary(b)
	bigFleet := filepath.Join(b.TempDir(), "fleet-10000.yaml")
	if err := os.WriteFile(bigFleet, []byte(bigFleetYAML()), 0o600); err != nil {
		b.Fatal(err)
	}
	if _, err := fleet.Load(bigFleet); err != nil {
		b.Fatalf("the 10,000-node fleet: %v", err)
	}
	demo := &apiServer{parent: b, bin: bin, typ: "l4.1x", maxHours: 4}
	big := &apiServer{parent: b, bin: bin, fleetFile: bigFleet, typ: "h100.8x", maxHours: 48}
	rows := []struct {
		name     string
		srv      *apiServer
		typ      string
		maxHours int
		from, to int
	}{
		{"demo/l4.1x/0-3000", demo, "l4.1x", 4, 0, 3000},
		{"demo/h100.8x/3000-6000", demo, "h100.8x", 4, 3000, 6000},
		{"10000-nodes/h100.8x/0-3000", big, "h100.8x", 48, 0, 3000},
		{"10000-nodes/h100.8x/90000-100000", big, "h100.8x", 48, 90000, 100000},
	}
	for _, r := range rows {
		b.Run(r.name, func(b *testing.B) {
			buyRow(b, r.srv, r.typ, r.maxHours, r.from, r.to)
		})
	}
	b.Run("10000-nodes/restart-100000", func(b *testing.B) {
		big.at(b, 100000)
		var listening, answered time.Duration
		var rss int64
		for range b.N {
			b.StopTimer()
			big.stop(b)
			b.StartTimer()
			start := time.Now()
			big.start(b)
			listening += time.Since(start)
			if _, err := searchOne(http.DefaultClient, big.p.url, "h100.8x", 24, t0.Add(time.Hour)); err != nil {
				b.Fatalf("the first search after the restart: %v", err)
			}
			answered += time.Since(start)
			rss = max(rss, procRSS(big.p.cmd.Process.Pid))
		}
		b.ReportMetric(answered.Seconds()/float64(b.N), "s-to-first-answer")
		b.ReportMetric(listening.Seconds()/float64(b.N), "s-to-listen")
		b.ReportMetric(float64(rss)/(1<<20), "server-rss-MiB")
	})
}

// buyRow buys blocks from to to through srv, 16 clients at once, and
// reports purchases per second.
func buyRow(b *testing.B, srv *apiServer, typ string, maxHours, from, to int) {
	if b.N > 1 {
		b.Fatalf("a row is a fixed %d purchases, not b.N of them: run with -benchtime 1x", to-from)
	}
	srv.at(b, from)
	n, url := to-from, srv.p.url
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	var next, refused, failed atomic.Int64
	var wg sync.WaitGroup
	_, server0, _ := procCPU(fmt.Sprintf("/proc/%d/stat", srv.p.cmd.Process.Pid))
	clients0 := selfCPU()
	b.ResetTimer()
	start := time.Now()
	stopProfiles := profileServer(b, srv.debug)
	for c := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := mathrand.New(mathrand.NewPCG(uint64(from), uint64(c)))
			for k := 0; next.Add(1) <= int64(n); {
				// One purchase: search and buy until one is bought.
				for bought := false; !bought; k++ {
					if k > 1000 {
						failed.Add(1)
						b.Logf("client %d: a thousand tries without a purchase", c)
						return
					}
					hours := 1 + rng.IntN(maxHours)
					s := t0.Add(time.Duration(1+rng.IntN(8*7*24-hours)) * time.Hour)
					id, err := searchOne(client, url, typ, hours, s)
					if err != nil {
						failed.Add(1)
						b.Logf("client %d: %v", c, err)
						return
					}
					if id == "" {
						refused.Add(1)
						continue
					}
					_, status, code, detail, err := postBlockWith(client, url, id, fmt.Sprintf("row%d-%d-%d", from, c, k))
					switch {
					case err != nil || (status != http.StatusCreated && status != http.StatusConflict):
						failed.Add(1)
						b.Logf("client %d: purchase: %d %s: %s %v", c, status, code, detail, err)
						return
					case status == http.StatusConflict:
						refused.Add(1)
					default:
						bought = true
					}
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	stopProfiles()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d clients failed", f)
	}
	srv.booked = to
	_, server1, _ := procCPU(fmt.Sprintf("/proc/%d/stat", srv.p.cmd.Process.Pid))
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
	b.ReportMetric(float64(n)/elapsed.Seconds(), "purchases/s")
	b.ReportMetric(per(server1-server0), "server-cpu-µs/purchase")
	b.ReportMetric(per(selfCPU()-clients0), "clients-cpu-µs/purchase")
	b.ReportMetric(float64(refused.Load()), "refused")
}

// profileServer takes CPU profiles of the server whose profiles listen at
// debug, one second after another into benchProfiles, until the function
// it returns is called; it does nothing when either is unset.
func profileServer(b *testing.B, debug string) (stop func()) {
	if benchProfiles == "" || debug == "" {
		return func() {}
	}
	if err := os.MkdirAll(benchProfiles, 0o755); err != nil {
		b.Fatal(err)
	}
	row := strings.NewReplacer("/", "-", "=", "-").Replace(b.Name())
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			resp, err := http.Get("http://" + debug + "/debug/pprof/profile?seconds=1")
			if err != nil {
				b.Errorf("profiling the server: %v", err)
				return
			}
			data, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Errorf("profiling the server: status %d, %v", resp.StatusCode, err)
				return
			}
			if err := os.WriteFile(filepath.Join(benchProfiles, fmt.Sprintf("%s-%03d.pprof", row, i)), data, 0o644); err != nil {
				b.Errorf("writing a profile: %v", err)
				return
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
		b.Logf("CPU profiles of the server in %s/%s-*.pprof", benchProfiles, row)
	}
}

// freeLoopbackAddr returns a loopback address with a port free now.
func freeLoopbackAddr(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// searchOne searches offerings of one instance of typ for hours from
// start exactly, and returns the id of the first one of that length, or
// "" when there is none.
func searchOne(client *http.Client, url, typ string, hours int, start time.Time) (string, error) {
	req, err := http.NewRequest("GET", url+"/v1/offerings?"+
		searchQuery(typ, 1, hours, start, start.Add(time.Duration(hours)*time.Hour)), nil)
	if err != nil {
		return "", err
	}
	if tok, ok := tokens.Load(url); ok {
		req.Header.Set("Authorization", "Bearer "+tok.(string))
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("search: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("search: status %d: %s", resp.StatusCode, data)
	}
	var out struct{ Offerings []offering }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", fmt.Errorf("search: %w", err)
	}
	for _, o := range out.Offerings {
		if o.DurationHours == hours {
			return o.OfferingID, nil
		}
	}
	return "", nil
}

// apiServer is one server of the benchmark, kept from row to row: its
// process, its directory, and the blocks it holds. Processes and
// directories belong to the parent benchmark, so that they outlive the
// row that started them.
type apiServer struct {
	parent    testing.TB
	bin       string
	fleetFile string // "" for the demo fleet
	// typ and maxHours are what its seeded purchases buy.
	typ      string
	maxHours int

	dir    string
	p      *process
	booked int
	// debug is the address of the running server's profiles, when
	// benchProfiles asks for them.
	debug string
	// templates are stopped servers' directories by the number of
	// purchases seeded in them, copied for each fresh server.
	templates map[int]string
}

// at makes sure that the server runs with exactly want blocks booked: the
// one running, or a fresh one with want purchases seeded.
func (s *apiServer) at(b *testing.B, want int) {
	b.Helper()
	if s.p != nil && s.booked == want {
		return
	}
	b.StopTimer()
	defer b.StartTimer()
	tpl := s.template(b, want)
	s.stop(b)
	s.dir = s.parent.TempDir()
	for _, name := range []string{"capblock.db", "capblock.db-wal", "admin.token", "secrets.key"} {
		if err := copyFile(filepath.Join(tpl, name), filepath.Join(s.dir, name)); err != nil && !os.IsNotExist(err) {
			b.Fatalf("copying the seeded server: %v", err)
		}
	}
	s.start(b)
	s.booked = want
}

// template returns the directory of a stopped server with n purchases
// seeded: started once on an empty database (which makes the first
// administrator, its team and token), the team's quota on instances held
// lifted (the rows measure the fleet, not a quota), stopped, then seeded.
func (s *apiServer) template(b *testing.B, n int) string {
	b.Helper()
	if dir, ok := s.templates[n]; ok {
		return dir
	}
	dir := s.parent.TempDir()
	db := filepath.Join(dir, "capblock.db")
	p := startProcessWith(outliving{b, s.parent}, s.bin, db, ts(t0), s.flags()...)
	useToken(b, p.url, filepath.Join(dir, "admin.token"))
	var me struct{ User user }
	if code := call(b, p.url, "GET", "/v1/whoami", nil, &me); code != 200 {
		b.Fatalf("whoami: status %d", code)
	}
	quota := map[string]any{"maxInstancesPerBlock": 0, "maxInstancesHeld": 1000000, "maxDurationHours": 0, "maxLeadDays": 0}
	var refusal problem
	if code := call(b, p.url, "PUT", "/v1/teams/"+me.User.Team+"/quotas", quota, &refusal); code != 200 {
		b.Fatalf("lifting the team's quota: status %d: %s", code, refusal.Detail)
	}
	stopProcess(b, p)
	if n > 0 {
		f := fleet.Demo()
		if s.fleetFile != "" {
			var err error
			if f, err = fleet.Load(s.fleetFile); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		seedPurchases(b, db, f, buyer{user: me.User.ID, team: me.User.Team}, s.typ, s.maxHours, n, uint64(n))
		b.Logf("seeded %d purchases in %s", n, time.Since(start).Round(time.Millisecond))
	}
	if s.templates == nil {
		s.templates = map[int]string{}
	}
	s.templates[n] = dir
	return dir
}

func (s *apiServer) flags() []string {
	flags := []string{"--allow-unisolated-jobs"}
	if s.fleetFile != "" {
		flags = append(flags, "--fleet", s.fleetFile)
	}
	return flags
}

// start starts the server on its directory, its simulated clock where
// the database left it.
func (s *apiServer) start(b *testing.B) {
	b.Helper()
	flags := s.flags()
	if benchProfiles != "" {
		s.debug = freeLoopbackAddr(b)
		flags = append(flags, "--debug-listen", s.debug)
	}
	s.p = startProcessWith(outliving{b, s.parent}, s.bin, filepath.Join(s.dir, "capblock.db"), "", flags...)
	useToken(b, s.p.url, filepath.Join(s.dir, "admin.token"))
}

// stop stops the running server, if any, as an operator would (SIGTERM).
func (s *apiServer) stop(b *testing.B) {
	if s.p != nil {
		stopProcess(b, s.p)
		s.p = nil
	}
}

func stopProcess(tb testing.TB, p *process) {
	tb.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		tb.Fatalf("stopping the server: %v", err)
	}
	_ = p.cmd.Wait()
}

// outliving is a row's testing.TB whose cleanups run when the parent
// benchmark ends: a server started in one row serves the next.
type outliving struct {
	testing.TB
	parent testing.TB
}

func (o outliving) Cleanup(f func()) { o.parent.Cleanup(f) }

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// selfCPU is this process's CPU time (user and system): the clients'.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procRSS reads a process's resident set size in bytes from
// /proc/PID/status, or 0.
func procRSS(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
