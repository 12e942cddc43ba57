package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"capblock/internal/api"
	"capblock/internal/backend/local"
	"capblock/internal/clock"
	"capblock/internal/fleet"
	"capblock/internal/service"
	"capblock/internal/store/sqlite"
)

const seriesFleet = `
currency: USD
instanceTypes:
  - {name: l4.1x, gpuModel: L4, gpusPerInstance: 1, onDemandPrice: "1.00"}
zones:
  - name: zone-a
    racks:
      - name: r1
        nodeGroups:
          - {prefix: l4-, count: 1, gpuModel: L4, gpus: 4}
`

// realServer runs the real service and API on a fresh SQLite file with a
// simulated clock at now, and returns its URL and admin token.
func realServer(t *testing.T, now time.Time) (*service.Service, string, string) {
	t.Helper()
	ctx := context.Background()
	f, err := fleet.Parse([]byte(seriesFleet))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "capblock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	log := slog.New(slog.DiscardHandler)
	svc, err := service.New(ctx, service.Config{Fleet: f, Store: st, Backend: local.NewSim(log, f.Nodes), Clock: clock.NewSim(now), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	tokenPath := filepath.Join(dir, "admin.token")
	if _, err := svc.Bootstrap(ctx, tokenPath); err != nil {
		t.Fatal(err)
	}
	token, err := os.ReadFile(tokenPath)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(svc.Guarded(), api.Options{Logger: log}))
	t.Cleanup(srv.Close)
	return svc, srv.URL, strings.TrimSpace(string(token))
}

// TestSeriesAndOrdersCommands drives the series and orders commands
// against a real server: the workshop across Madrid's change to summer
// time, bought by row, listed, shown, one occurrence cancelled as a
// block and the rest as the series; an order that waits above its
// maxFee, shown and cancelled; errors in one line.
func TestSeriesAndOrdersCommands(t *testing.T) {
	svc, url, token := realServer(t, time.Date(2027, 3, 15, 0, 0, 0, 0, time.UTC))
	run := func(args ...string) result {
		t.Helper()
		r := runApp(t.Context(), map[string]string{"CAPBLOCK_URL": url, "CAPBLOCK_TOKEN": token}, args...)
		for _, line := range strings.Split(r.stdout, "\n") {
			if n := len([]rune(line)); n > 120 {
				t.Errorf("%v: a line of %d columns: %q", args, n, line)
			}
		}
		return r
	}
	ok := func(r result, want ...string) {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		for _, w := range want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("output lacks %q:\n%s", w, r.stdout)
			}
		}
	}
	fails := func(r result, want string) {
		t.Helper()
		if r.code == 0 || !strings.Contains(r.stderr, want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("want a one-line error with %q; exit %d, stderr %q", want, r.code, r.stderr)
		}
	}

	search := []string{"series", "search", "--type", "l4.1x", "--count", "4", "--days", "weekdays", "--start", "09:00", "--end", "17:00",
		"--tz", "Europe/Madrid", "--from", "2027-03-22", "--weeks", "2"}
	ok(run(search...), "10 of 10", "Mon 2027-03-22 09:00 +01:00  17:00", "2027-03-22 08:00",
		"Mon 2027-03-29 09:00 +02:00  17:00", "2027-03-29 07:00")
	fails(run("series", "buy", "3"), "row 3: your last search found 1 offering; give row 1")
	ok(run("series", "buy", "1", "--name", "workshop"), "workshop", "scheduled")
	ok(run("series", "list"), "workshop", "4×l4.1x", "weekdays 09:00-17:00 Europe/Madrid", "10")
	ok(run("series", "show", "workshop"), "2027-03-22 to 2027-04-04", "Fri 2027-04-02 09:00 +02:00")

	list, err := svc.ListSeries(t.Context(), "")
	if err != nil || len(list) != 1 || len(list[0].Series.Occurrences) != 10 {
		t.Fatalf("series stored: %+v, %v", list, err)
	}
	first := list[0].Series.Occurrences[0].ID
	ok(run("blocks", "cancel", first, "--yes"))
	ok(run("series", "show", "workshop"), first, "cancelled")
	ok(run("series", "cancel", "workshop", "--yes"), "state:       cancelled")
	fails(run("series", "cancel", "workshop", "--yes"), "no occurrence left to cancel")
	fails(run("series", "cancel", "workshop"), "pass --yes")

	// The whole node is free again: a search with one occurrence taken
	// cannot be bought whole.
	ok(run("orders", "create", "--type", "l4.1x", "--count", "4", "--duration", "8h", "--start-after", "2027-03-16T00:00:00Z",
		"--end-before", "2027-03-17T00:00:00Z", "--mode", "buy", "--max-fee", "0.01", "--name", "cheap"), "open", "0.01 USD")
	if err := svc.ServeOrders(t.Context()); err != nil {
		t.Fatal(err)
	}
	ok(run("orders", "show", "cheap"), "above maxFee 0.01 USD")
	ok(run("orders", "list"), "4×l4.1x")
	ok(run("orders", "cancel", "cheap", "--yes"), "cancelled")
	fails(run("orders", "create", "--type", "l4.1x", "--duration", "8h", "--end-before", "+2d", "--mode", "maybe"), "--mode \"maybe\"")
	fails(run("orders", "create", "--type", "l4.1x", "--duration", "8h", "--end-before", "+2d", "--mode", "buy"), "--mode buy needs --max-fee")
}
