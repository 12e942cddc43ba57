package backend_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/backend"
	"capblock/internal/backend/backendtest"
	"capblock/internal/backend/local"
	"capblock/internal/core"
)

// TestPayloadRoundTrip: a backend sees, from an action's payload, the
// whole block as the decision saw it, in UTC.
func TestPayloadRoundTrip(t *testing.T) {
	cet := time.FixedZone("CET", 3600)
	b := core.Block{ID: "cb-1", Name: "load test", Team: "t", InstanceType: "h100.8x", GPUModel: "H100", Count: 2, Zone: "z",
		Start: time.Date(2026, 12, 1, 1, 0, 0, 0, cet), End: time.Date(2026, 12, 1, 5, 0, 0, 0, cet),
		State: core.StateActive, Terminating: true, PlanID: "tp-1",
		Placements: []core.Placement{{Node: "n0", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}, {Node: "n1", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}},
		Fee:        core.Money{Minor: 100, Currency: "USD"}, Tags: map[string]string{"k": "v"}, Version: 7, Warned: true}
	got, err := backend.DecodeBlock(backend.EncodeBlock(b))
	if err != nil {
		t.Fatal(err)
	}
	want := b
	want.Start, want.End = b.Start.UTC(), b.End.UTC()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded block (-want +got):\n%s", diff)
	}
}

// TestApplyPermanent: an action that no backend call can take is a
// permanent error, and reaches no backend call.
func TestApplyPermanent(t *testing.T) {
	blk := core.Block{ID: "cb-1", Team: "t"}
	tests := map[string]core.Action{
		"a job's kind":         {ID: "ac-1", Kind: core.ActionStartInstance, Subject: "cb-1", Payload: backend.EncodeBlock(blk)},
		"a payload not JSON":   {ID: "ac-2", Kind: core.ActionActivate, Subject: "cb-1", Payload: []byte("{")},
		"no payload":           {ID: "ac-3", Kind: core.ActionRelease, Subject: "cb-1"},
		"another block's data": {ID: "ac-4", Kind: core.ActionRelease, Subject: "cb-2", Payload: backend.EncodeBlock(blk)},
	}
	for name, a := range tests {
		t.Run(name, func(t *testing.T) {
			f := backendtest.NewFlaky(local.NewSim(slog.New(slog.DiscardHandler), nil))
			if err := backend.Apply(context.Background(), f, a); !errors.Is(err, backend.ErrPermanent) {
				t.Errorf("Apply: %v, want ErrPermanent", err)
			}
			if calls := f.Calls(); len(calls) != 0 {
				t.Errorf("calls %v, want none", calls)
			}
		})
	}
}

// TestApplyPassesErrors: a backend's failure is not permanent, and says
// what failed.
func TestApplyPassesErrors(t *testing.T) {
	f := backendtest.NewFlaky(local.NewSim(slog.New(slog.DiscardHandler), nil))
	f.FailNext(core.ActionActivate, 1, backendtest.ErrInjected)
	a := core.Action{ID: "ac-1", Kind: core.ActionActivate, Subject: "cb-1", Payload: backend.EncodeBlock(core.Block{ID: "cb-1"})}
	err := backend.Apply(context.Background(), f, a)
	if !errors.Is(err, backendtest.ErrInjected) || errors.Is(err, backend.ErrPermanent) {
		t.Fatalf("Apply: %v, want the injected error, not permanent", err)
	}
	if want := "activate of block cb-1 on the sim backend: injected failure"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if err := backend.Apply(context.Background(), f, a); err != nil {
		t.Fatalf("Apply again: %v", err)
	}
	want := []backendtest.Call{{Kind: core.ActionActivate, Block: "cb-1", Err: "injected failure"}, {Kind: core.ActionActivate, Block: "cb-1"}}
	if diff := cmp.Diff(want, f.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}
