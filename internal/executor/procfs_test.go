package executor

import (
	"os"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseStat(t *testing.T) {
	// The command name may hold spaces and parentheses.
	line := "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 " +
		"18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	got, err := parseStat(4242, []byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(procStat{state: 'S', ppid: 1, pgrp: 4242, startTicks: 987654}, got, cmp.AllowUnexported(procStat{})); diff != "" {
		t.Errorf("parseStat (-want +got):\n%s", diff)
	}
	if _, err := parseStat(1, []byte("1 (x) S 1")); err == nil {
		t.Error("parseStat of a short line succeeded, want an error")
	}
}

func TestReadStatOfThisProcess(t *testing.T) {
	st, err := readStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !alive(os.Getpid(), st.startTicks) {
		t.Error("this process is not alive")
	}
	if alive(os.Getpid(), st.startTicks+1) {
		t.Error("a different start time counts as alive")
	}
}

func TestExitFromStatus(t *testing.T) {
	tests := map[string]struct {
		status int
		want   Exit
	}{
		"success":        {0, Exit{Code: 0}},
		"failure":        {1, Exit{Code: 1}},
		"not found":      {127, Exit{Code: 127}},
		"128 is a code":  {128, Exit{Code: 128}},
		"SIGTERM":        {143, Exit{Code: 143, Signaled: true, Signal: "SIGTERM"}},
		"real-time":      {128 + 40, Exit{Code: 168, Signaled: true, Signal: "SIG40"}},
		"beyond signals": {255, Exit{Code: 255}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, exitFromStatus(Exit{}, tc.status)); diff != "" {
				t.Errorf("exitFromStatus(%d) (-want +got):\n%s", tc.status, diff)
			}
		})
	}
	want := Exit{Code: 137, Signaled: true, Signal: "SIGKILL"}
	if diff := cmp.Diff(want, exitFromSignal(Exit{}, syscall.SIGKILL)); diff != "" {
		t.Errorf("exitFromSignal (-want +got):\n%s", diff)
	}
}
