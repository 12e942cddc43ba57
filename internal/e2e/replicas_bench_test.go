package e2e

import (
	"fmt"
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
)

// BenchmarkReplicaPurchases measures purchases per second through the
// HTTP API of 1 and of 3 replicas on one PostgreSQL, and of the embedded
// default (one server on SQLite, durable) for comparison, 16 clients
// spread over the servers, each purchase one h100.8x for an hour (8
// allocation rows, the charge, 2 events and the audit record, in one
// transaction). Everything runs on this machine: the servers, PostgreSQL
// and the clients share its cores, so it also reports the CPU time each
// of them spent per purchase.
func BenchmarkReplicaPurchases(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		if testing.Short() {
			b.Skip("builds and runs the server binary")
		}
		dir := b.TempDir()
		p := startProcess(b, buildBinary(b), filepath.Join(dir, "capblock.db"), ts(t0))
		useToken(b, p.url, filepath.Join(dir, "admin.token"))
		benchPurchases(b, []*replica{{cmd: p.cmd, url: p.url}})
	})
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			_, rs := startReplicas(b, n)
			benchPurchases(b, rs)
		})
	}
}

// benchPurchases runs b.N purchases through the servers rs.
func benchPurchases(b *testing.B, rs []*replica) {
	n := len(rs)
	// Slots at many hours, one per zone and hour, each with room for 32
	// purchases; purchase i buys in slot i mod the number of slots. A
	// quote buys once, so each purchase has a quote of its own: before
	// the timer starts, the slots are searched in rounds, each round
	// giving every slot a new quote, in the same order, until there is a
	// quote for every purchase.
	search := func(s time.Time) []string {
		var out struct{ Offerings []offering }
		call(b, rs[0].url, "GET", "/v1/offerings?"+searchQuery("h100.8x", 1, 1, s, s.Add(time.Hour)), nil, &out)
		var ids []string
		for _, o := range out.Offerings {
			if o.DurationHours == 1 {
				ids = append(ids, o.OfferingID)
			}
		}
		return ids
	}
	var hours []time.Time
	var offers []string
	for h := 1; len(offers) < b.N/32+2; h++ {
		s := t0.Add(time.Duration(h) * time.Hour)
		hours = append(hours, s)
		offers = append(offers, search(s)...)
	}
	for slots := len(offers); len(offers) < b.N; {
		for _, s := range hours {
			offers = append(offers, search(s)...)
		}
		if len(offers)%slots != 0 {
			b.Fatalf("a round of searches gave %d quotes, the first %d", len(offers)%slots, slots)
		}
	}
	// Clients keep their connections, as a load balancer's would:
	// http.DefaultClient keeps 2 per host and would reconnect for
	// most purchases.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	cpu0 := benchCPU(rs)
	b.ResetTimer()
	start := time.Now()
	for c := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= b.N {
					return
				}
				_, status, code, detail, err := postBlockWith(client, rs[(c+i)%n].url, offers[i], fmt.Sprintf("bench-%d", i))
				if err != nil || status != http.StatusCreated {
					failed.Add(1)
					b.Logf("purchase %d: %d %s: %s %v", i, status, code, detail, err)
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "purchases/s")
	cpu := benchCPU(rs)
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
	b.ReportMetric(per(cpu.postgres-cpu0.postgres), "pg-cpu-µs/op")
	b.ReportMetric(per(cpu.replicas-cpu0.replicas), "replicas-cpu-µs/op")
	b.ReportMetric(per(cpu.clients-cpu0.clients), "clients-cpu-µs/op")
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d of %d purchases failed", f, b.N)
	}
}

// cpuTimes are the CPU times (user and system) of the parts of the
// benchmark so far.
type cpuTimes struct{ postgres, replicas, clients time.Duration }

// benchCPU reads the CPU times of every PostgreSQL process on the machine
// (the test's server is the only one), of the replicas and of this
// process, whose goroutines are the clients.
func benchCPU(rs []*replica) cpuTimes {
	var c cpuTimes
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		if comm, cpu, ok := procCPU(f); ok && comm == "postgres" {
			c.postgres += cpu
		}
	}
	for _, r := range rs {
		if _, cpu, ok := procCPU(fmt.Sprintf("/proc/%d/stat", r.cmd.Process.Pid)); ok {
			c.replicas += cpu
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		c.clients = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return c
}

// procCPU reads a process's command name and CPU time from its
// /proc/PID/stat (proc(5): utime and stime are fields 14 and 15, in
// USER_HZ ticks, 100 per second).
func procCPU(path string) (string, time.Duration, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", 0, false
	}
	s := string(data)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0, false
	}
	fields := strings.Fields(s[end+1:]) // fields 3 onwards
	if len(fields) < 13 {
		return "", 0, false
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, false
	}
	return s[open+1 : end], time.Duration(utime+stime) * (time.Second / 100), true
}
