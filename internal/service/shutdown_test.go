package service

import (
	"io"
	"log/slog"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"capblock/internal/backend/local"
	"capblock/internal/clock"
	"capblock/internal/core"
	"capblock/internal/store/pgtest"
	"capblock/internal/store/postgres"
)

// TestRunLeavesNothingRunning: once Run returns, no goroutine of the
// service is left (the follower of other replicas' commits included), so
// that the server may close the store after it.
func TestRunLeavesNothingRunning(t *testing.T) {
	dsn := pgtest.Start(t).NewDatabase(t)
	st, err := postgres.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc, err := New(t.Context(), Config{Fleet: core.Fleet{Currency: "USD", Limits: core.DefaultLimits(), Pricing: core.DefaultPricing()},
		Store: st, Backend: local.NewSim(slog.New(slog.DiscardHandler), nil), // its outbox worker runs too
		Clock: clock.NewSim(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	_, stop := runService(t, svc)
	for deadline := time.Now().Add(10 * time.Second); !svc.Leading(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the service never took the lead")
		}
	}
	stop()
	var dump strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&dump, 1); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(dump.String(), "capblock/internal/service.(*Service)") {
		t.Fatalf("goroutines of the service outlived Run:\n%s", dump.String())
	}
}
