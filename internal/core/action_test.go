package core

import "testing"

// TestBlockActionOf: the lifecycle events that need an engine step, and
// which one.
func TestBlockActionOf(t *testing.T) {
	tests := map[string]struct {
		want ActionKind
		ok   bool
	}{
		EventBlockActive:            {ActionActivate, true},
		EventBlockTerminating:       {ActionTerminate, true},
		EventBlockExpired:           {ActionRelease, true},
		EventBlockCancelled:         {ActionRelease, true},
		EventBlockPaymentFailed:     {ActionRelease, true},
		EventBlockScheduled:         {"", false},
		EventBlockExpirationWarning: {"", false},
		EventBlockExtended:          {"", false},
		EventBlockApproved:          {"", false},
	}
	for event, tc := range tests {
		if got, ok := BlockActionOf(event); got != tc.want || ok != tc.ok {
			t.Errorf("BlockActionOf(%s) = %q, %v; want %q, %v", event, got, ok, tc.want, tc.ok)
		}
	}
}
