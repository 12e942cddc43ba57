package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestPrintable(t *testing.T) {
	tests := map[string]string{
		"":                      "",
		"load-test":             "load-test",
		"naïve 日本語 ✓ 🚀 ×":       "naïve 日本語 ✓ 🚀 ×",
		`C:\data`:               `C:\data`,
		"evil\x1b[2J\x07":       `evil\x1b[2J\a`,
		"a\tb\nc\rd\x00e\x7f":   `a\tb\nc\rd\x00e\x7f`,
		"csi\u009b31m":          `csi\u009b31m`,
		"txt.exe\u202egpj":      `txt.exe\u202egpj`,
		"zero\u200bwidth\ufeff": `zero\u200bwidth\ufeff`,
		"nb\u00a0sp":            `nb\u00a0sp`,
		"bad\xffutf8\xc3":       `bad\xffutf8\xc3`,
		"tag\U000e0041s":        `tag\U000e0041s`,
		"replacement \ufffd ok": "replacement \ufffd ok",
		"line\u2028separator":   `line\u2028separator`,
		"private\ue000use":      `private\ue000use`,
		"unit\x1fseparator":     `unit\x1fseparator`,
	}
	for in, want := range tests {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPrintableJSON(t *testing.T) {
	for _, s := range []string{"plain", "evil\x1b[2J\x07", "del\x7f", "csi\u009b", "rlo\u202e", "tag\U000e0041", "bad\xff", "日本語 🚀"} {
		in, err := json.MarshalIndent(map[string]any{"name": s, "list": []string{s}}, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		out := printableJSON(in)
		if c := rawControls(string(out)); c != nil {
			t.Errorf("%q: %q still holds %q", s, out, c)
		}
		var before, after any
		if err := json.Unmarshal(in, &before); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("%q: not JSON: %v\n%s", s, err, out)
		}
		if diff := cmp.Diff(before, after); diff != "" {
			t.Errorf("%q: decodes differently (-before +after):\n%s", s, diff)
		}
	}
}

// rawControls returns the characters of s, other than newlines, that
// printable would escape.
func rawControls(s string) []rune {
	var found []rune
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r != '\n' && ((r == utf8.RuneError && size == 1) || !shownAsIs(r)) {
			found = append(found, r)
		}
		i += size
	}
	return found
}

const (
	evilName   = "evil\x1b[2J\x07"
	evilDetail = "block cb-x\x1b]0;owned\x07 not found\u202e\u009b"
	evilBlock  = `{"id": "cb-evil", "name": "evil\u001b[2J\u0007", "team": "ml\u202e", "instanceType": "h100.8x", "gpuModel": "H100",
		"instanceCount": 2, "zone": "zone-a\tb", "startTime": "2026-12-01T00:00:00Z", "endTime": "2026-12-03T00:00:00Z",
		"durationHours": 48, "state": "scheduled", "upfrontFee": {"amount": "7078.08", "currency": "USD"},
		"createdAt": "2026-11-20T10:00:00Z", "tags": {"env\u001b[31m": "prod\u0085"}}`
)

// evilAPI serves a block, an event and an error whose strings hold
// control characters.
func evilAPI(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	reply := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, body)
		}
	}
	mux.HandleFunc("GET /v1/blocks", reply(`{"blocks": [`+evilBlock+`]}`))
	mux.HandleFunc("GET /v1/blocks/cb-evil", reply(evilBlock))
	mux.HandleFunc("GET /v1/blocks/cb-x", func(w http.ResponseWriter, r *http.Request) {
		problem(w, http.StatusNotFound, "not_found", evilDetail)
	})
	mux.HandleFunc("GET /v1/events", reply(`{"events": [{"id": "evt-1", "time": "2026-12-01T00:00:00Z",
		"type": "block.active\u001b[1A", "subject": "cb-evil\r", "team": "ml", "data": {"name": "evil\u001b[2J\u007f\u202e"}}], "next": "c1\u0007"}`))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestServerStringsAreEscaped runs the commands that print a block, a
// list, events and an error from a server whose strings hold control
// characters: nothing of them reaches the terminal raw.
func TestServerStringsAreEscaped(t *testing.T) {
	url := evilAPI(t)
	tests := map[string]struct {
		args     []string
		wantCode int
		want     string // a part of stdout, or of stderr on failure
	}{
		"list":        {args: []string{"blocks", "list"}, want: `evil\x1b[2J\a`},
		"show":        {args: []string{"blocks", "show", "cb-evil"}, want: `env\x1b[31m=prod\u0085`},
		"show json":   {args: []string{"-o", "json", "blocks", "show", "cb-evil"}, want: `"name": "evil\u001b[2J\u0007"`},
		"events":      {args: []string{"events"}, want: `block.active\x1b[1A`},
		"events json": {args: []string{"-o", "json", "events"}, want: `\u202e`},
		"error":       {args: []string{"blocks", "show", "cb-x"}, wantCode: 1, want: `block cb-x\x1b]0;owned\a not found\u202e\u009b`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := runApp(t.Context(), nil, append([]string{"--url", url, "--token", testToken("a")}, tc.args...)...)
			if got.code != tc.wantCode {
				t.Fatalf("exit %d, want %d; stderr %q", got.code, tc.wantCode, got.stderr)
			}
			for stream, out := range map[string]string{"stdout": got.stdout, "stderr": got.stderr} {
				if c := rawControls(out); c != nil {
					t.Errorf("%s holds raw %q:\n%q", stream, c, out)
				}
			}
			if !strings.Contains(got.stdout+got.stderr, tc.want) {
				t.Errorf("output lacks %q:\nstdout %q\nstderr %q", tc.want, got.stdout, got.stderr)
			}
		})
	}
}
