package slurm

import (
	"strings"
	"testing"
)

// TestFailed reads a session's answers as scontrol 22.05 gives them
// (session_test.go runs them on a real Slurm): success, and each way a
// command fails without an exit status to say so.
func TestFailed(t *testing.T) {
	tests := []struct {
		command        string
		stdout, stderr string
		want           bool
	}{
		{"create reservation ReservationName=a", "Reservation created: a\n", "", false},
		{"create reservation ReservationName=a", "", "Error creating the reservation: Requested reservation overlaps with another reservation\n", true},
		{"create reservation ReservationName=a", "", "", true}, // no confirmation
		{"update ReservationName=a Nodes=n1", "Reservation updated.\n", "", false},
		{"update ReservationName=a Nodes=n1", "", "Error updating the reservation: Requested reservation is invalid\nslurm_update error: Requested reservation is invalid\n", true},
		{"delete ReservationName=a", "", "", false},
		{"delete ReservationName=a", "", "delete_reservation ReservationName=a: Requested reservation is invalid\n", true},
		{"show reservation a", "ReservationName=a StartTime=2026-12-01T22:36:35 Nodes=n1\n", "", false},
		{"show reservation a", "Reservation a not found\n", "", true},
		{"show reservation", "No reservations in the system\n", "", true},
	}
	for _, tc := range tests {
		if got := failed(strings.Fields(tc.command), tc.stdout, tc.stderr); got != tc.want {
			t.Errorf("%s, printing %q and %q: failed %v, want %v", tc.command, tc.stdout, tc.stderr, got, tc.want)
		}
	}
}
