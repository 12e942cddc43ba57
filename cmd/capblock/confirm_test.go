package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// TestConfirmAtATerminal checks that cancel and extend ask at a terminal,
// act on "y" only, and send nothing that spends or refunds otherwise.
func TestConfirmAtATerminal(t *testing.T) {
	tests := map[string]struct {
		args       []string
		answer     string
		wantCode   int
		wantStderr []string // lines, in order
		wantPost   bool
	}{
		"cancel, yes": {
			args:       []string{"blocks", "cancel", "cb-1"},
			answer:     "y\n",
			wantStderr: []string{"cancelling block cb-1 (load-test): scheduled", "Cancel it? [y/N] cancelled block cb-1: nothing was refunded"},
			wantPost:   true,
		},
		"cancel, no": {
			args:       []string{"blocks", "cancel", "cb-1"},
			answer:     "n\n",
			wantCode:   1,
			wantStderr: []string{"refund 3539.04 USD (50% of the fee", "Cancel it? [y/N] capblock: block cb-1 was not cancelled"},
		},
		"cancel, end of input": {
			args:       []string{"blocks", "cancel", "cb-1"},
			wantCode:   1,
			wantStderr: []string{"Cancel it? [y/N] ", "capblock: block cb-1 was not cancelled"},
		},
		"extend, yes": {
			args:       []string{"blocks", "extend", "cb-1", "--duration", "1d"},
			answer:     "YES\n",
			wantStderr: []string{"for 3539.04 USD", "Extend it? [y/N] extended block cb-1 to 2026-12-04 00:00 UTC: charged 3539.04 USD"},
			wantPost:   true,
		},
		"extend, anything else": {
			args:       []string{"blocks", "extend", "cb-1", "--duration", "1d"},
			answer:     "sure\n",
			wantCode:   1,
			wantStderr: []string{"Extend it? [y/N] capblock: block cb-1 was not extended"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			api := newFakeAPI(t)
			var out, errOut bytes.Buffer
			a := &app{stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }, now: func() time.Time { return testNow },
				configDir: os.UserConfigDir, stdin: strings.NewReader(tc.answer), interactive: func() bool { return true }}
			code := a.execute(t.Context(), append([]string{"--url", api.URL}, tc.args...))
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d; stderr %q", code, tc.wantCode, errOut.String())
			}
			rest := errOut.String()
			for _, want := range tc.wantStderr {
				i := strings.Index(rest, want)
				if i < 0 {
					t.Fatalf("stderr %q has no %q (after what came before)", errOut.String(), want)
				}
				rest = rest[i+len(want):]
			}
			posted := false
			for _, r := range api.seen() {
				posted = posted || strings.HasPrefix(r, "POST ")
			}
			if posted != tc.wantPost {
				t.Errorf("a POST was sent: %v, want %v; requests %q", posted, tc.wantPost, api.seen())
			}
		})
	}
}
