package main

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// TestVersion: version prints one line naming the binary's version and
// Go's, without a server; -o json gives the same fields.
func TestVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"version"}, &out, &errOut); code != 0 || errOut.Len() != 0 {
		t.Fatalf("version: exit %d, stderr %q", code, errOut.String())
	}
	line := out.String()
	if !strings.HasPrefix(line, "capblock ") || !strings.Contains(line, runtime.Version()) || strings.Count(line, "\n") != 1 {
		t.Errorf("version printed %q; want one line naming capblock and %s", line, runtime.Version())
	}
	out.Reset()
	if code := run([]string{"version", "-o", "json"}, &out, &errOut); code != 0 {
		t.Fatalf("version -o json: exit %d, stderr %q", code, errOut.String())
	}
	var v versionInfo
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v.Go != runtime.Version() || v.Version == "" || v.Commit == "" {
		t.Errorf("version -o json: %s (%v)", out.String(), err)
	}
}
