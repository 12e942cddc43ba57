package main

import (
	"os"
	"strings"
	"testing"
)

// TestServeBadFlags: a bad flag of serve is one line saying what is wrong,
// exit status 2, before anything is opened or created.
func TestServeBadFlags(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string
	}{
		"log level":             {[]string{"--log-level", "loud"}, `--log-level "loud": want debug, info, warn or error`},
		"webhook log retention": {[]string{"--webhook-log-retention", "forever"}, `--webhook-log-retention "forever": want a positive duration`},
		"zero retention":        {[]string{"--webhook-log-retention", "0"}, `--webhook-log-retention "0": want a positive duration`},
		"engine poll too short": {[]string{"--engine-poll", "10ms"}, `--engine-poll "10ms": want a duration of at least 1s`},
		"sim start":             {[]string{"--sim-clock", "--sim-start", "yesterday"}, `--sim-start "yesterday" is not an RFC 3339 time`},
		"backend":               {[]string{"--backend", "k8s"}, `--backend "k8s" is not available`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			db := dir + "/capblock.db"
			got := runApp(t.Context(), nil, append([]string{"serve", "--db", db, "--listen", "127.0.0.1:0"}, tc.args...)...)
			if got.code != 2 || !strings.Contains(got.stderr, tc.want) || strings.Count(got.stderr, "\n") != 1 {
				t.Errorf("serve %v: exit %d, stderr %q; want 2 and one line with %q", tc.args, got.code, got.stderr, tc.want)
			}
			if _, err := os.Stat(db); err == nil {
				t.Errorf("serve %v created %s before refusing its flags", tc.args, db)
			}
		})
	}
}
