package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// TestOutputFormats runs commands with each -o format and --no-headers
// against the fake server, bad values included.
func TestOutputFormats(t *testing.T) {
	tests := map[string]struct {
		args         []string
		want         result
		wantRequests []string // nil: not checked
	}{
		"yaml: the JSON's keys, in their order": {
			args: []string{"-o", "yaml", "events"},
			want: result{stdout: lines(
				"events:",
				"  - id: evt-1",
				`    time: "2026-12-01T00:00:00Z"`,
				"    type: block.active",
				"    subject: cb-1",
				"    team: ml",
				"    data:",
				"      zone: zone-a",
				"  - id: evt-2",
				`    time: "2026-12-02T23:20:00Z"`,
				"    type: block.expiration-warning",
				"    subject: cb-1",
				"    team: ml",
				"    data: {}",
				"next: c2",
			)},
		},
		"yaml: an amount stays a string, a count a number": {
			args: []string{"-o", "yaml", "blocks", "show", "cb-2"},
			want: result{stdout: lines(
				"id: cb-2",
				`name: ""`,
				"team: ml",
				"instanceType: l4.1x",
				"gpuModel: L4",
				"instanceCount: 1",
				"zone: zone-b",
				`startTime: "2026-11-20T12:00:00Z"`,
				`endTime: "2026-11-20T16:00:00Z"`,
				"durationHours: 4",
				"state: active",
				"upfrontFee:",
				`  amount: "3.00"`,
				"  currency: USD",
				`createdAt: "2026-11-20T10:00:00Z"`,
				"tags: {}",
			)},
		},
		"jsonpath: a field of every item": {
			args: []string{"-o", "jsonpath={.blocks[*].id}", "blocks", "list"},
			want: result{stdout: "cb-1 cb-2"},
		},
		"jsonpath: a range, with the template's tabs and newlines": {
			args: []string{"-o", `jsonpath={range .blocks[*]}{.id}{"\t"}{.state}{"\n"}{end}`, "blocks", "list"},
			want: result{stdout: "cb-1\tscheduled\ncb-2\tactive\n"},
		},
		"jsonpath: a filter compares numbers": {
			args: []string{"-o", "jsonpath={.blocks[?(@.instanceCount>1)].name}", "blocks", "list"},
			want: result{stdout: "load-test"},
		},
		"jsonpath: a map prints as JSON": {
			args: []string{"-o", "jsonpath={.tags}", "blocks", "show", "cb-1"},
			want: result{stdout: `{"env":"prod"}`},
		},
		"jsonpath: a missing key prints nothing, as kubectl's": {
			args: []string{"-o", "jsonpath={.blocks[*].nothing}", "blocks", "list"},
			want: result{},
		},
		"jsonpath: of a table-only command's data": {
			args: []string{"-o", "jsonpath={.nodes[?(@.health==\"unhealthy\")].name}", "nodes"},
			want: result{stdout: "b-l4-01"},
		},
		"jsonpath: a template that does not parse, before any request": {
			args: []string{"-o", "jsonpath={.blocks[*].id", "blocks", "list"},
			want: result{code: 2, stderr: "capblock: -o jsonpath={.blocks[*].id: the template does not parse: unclosed action; " +
				"write it like -o jsonpath='{.blocks[*].id}' (see 'capblock blocks list --help')\n"},
			wantRequests: []string{},
		},
		"jsonpath: a template with an unknown character": {
			args: []string{"-o", "jsonpath={{.blocks}}", "blocks", "list"},
			want: result{code: 2, stderr: "capblock: -o jsonpath={{.blocks}}: the template does not parse: unrecognized character in action: U+007B '{'; " +
				"write it like -o jsonpath='{.blocks[*].id}' (see 'capblock blocks list --help')\n"},
			wantRequests: []string{},
		},
		"jsonpath: no template": {
			args:         []string{"-o", "jsonpath=", "blocks", "list"},
			want:         result{code: 2, stderr: "capblock: -o jsonpath needs a template: write it like -o jsonpath='{.blocks[*].id}' (see 'capblock blocks list --help')\n"},
			wantRequests: []string{},
		},
		"jsonpath: a template that fails on the data": {
			args: []string{"-o", "jsonpath={.blocks[5].id}", "blocks", "list"},
			want: result{code: 1, stderr: "capblock: -o jsonpath={.blocks[5].id}: array index out of bounds: index 5, length 2 " +
				"(the template reads the fields that -o json prints)\n"},
		},
		"an unknown format": {
			args:         []string{"-o", "xml", "blocks", "list"},
			want:         result{code: 2, stderr: "capblock: -o \"xml\": choose table, wide, json, yaml or jsonpath=TEMPLATE (see 'capblock blocks list --help')\n"},
			wantRequests: []string{},
		},
		"--no-headers: a table's rows alone": {
			args: []string{"--no-headers", "types"},
			want: result{stdout: lines(
				"h100.8x  H100  8  98.32 USD  zone-a,zone-b",
				"l4.1x    L4    1  1.00 USD   zone-b",
			)},
		},
		"--no-headers: with -o wide, columns as wide as their rows": {
			args: []string{"--no-headers", "-o", "wide", "nodes"},
			want: result{stdout: lines(
				"a-h100-01  zone-a  a-r1  H100  8  healthy    fabric=ib",
				"b-l4-01    zone-b  b-r7  L4    4  unhealthy  -",
			)},
		},
		"--no-headers: events": {
			args: []string{"--no-headers", "events"},
			want: result{
				stdout: lines(
					"2026-12-01 00:00  block.active               cb-1                   evt-1                  {\"zone\":\"zone-a\"}",
					"2026-12-02 23:20  block.expiration-warning   cb-1                   evt-2",
				),
				stderr: "next: capblock events --after c2\n",
			},
		},
		"a followed stream: the template over each event": {
			args: []string{"-o", `jsonpath={.type} {.subject}{"\n"}`, "events", "--until", "block.active"},
			want: result{stdout: "block.active cb-1\n"},
		},
		"a followed stream: one YAML document an event": {
			args: []string{"-o", "yaml", "events", "--until", "block.active"},
			want: result{stdout: lines(
				"---",
				"id: evt-1",
				`time: "2026-12-01T00:00:00Z"`,
				"type: block.active",
				"subject: cb-1",
				"team: ml",
				"data:",
				"  zone: zone-a",
			)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			api := newFakeAPI(t)
			var seen func() []string
			if tc.wantRequests != nil {
				seen = api.seen
			}
			checkRun(t, api.URL, seen, tc.args, tc.want, tc.wantRequests)
		})
	}
}

// TestYAMLIsTheJSON checks that -o yaml and -o json print the same value
// for commands of every kind: lists, one thing, a page of events.
func TestYAMLIsTheJSON(t *testing.T) {
	api := newFakeAPI(t)
	for _, args := range [][]string{{"blocks", "list"}, {"blocks", "show", "cb-1"}, {"blocks", "status", "cb-1"}, {"events"}, {"types"}, {"nodes"}} {
		asJSON := runApp(t.Context(), nil, append([]string{"--url", api.URL, "-o", "json"}, args...)...)
		asYAML := runApp(t.Context(), nil, append([]string{"--url", api.URL, "-o", "yaml"}, args...)...)
		if asJSON.code != 0 || asYAML.code != 0 {
			t.Fatalf("%v: exit %d and %d: %s%s", args, asJSON.code, asYAML.code, asJSON.stderr, asYAML.stderr)
		}
		var fromJSON, fromYAML any
		if err := json.Unmarshal([]byte(asJSON.stdout), &fromJSON); err != nil {
			t.Fatalf("%v -o json: %v", args, err)
		}
		if err := yaml.Unmarshal([]byte(asYAML.stdout), &fromYAML); err != nil {
			t.Fatalf("%v -o yaml: %v\n%s", args, err, asYAML.stdout)
		}
		// JSON decodes every number as a float64; YAML, a whole one as an int.
		normalized, _ := json.Marshal(fromYAML)
		json.Unmarshal(normalized, &fromYAML)
		if diff := cmp.Diff(fromJSON, fromYAML); diff != "" {
			t.Errorf("%v: -o yaml is not -o json's value (-json +yaml):\n%s", args, diff)
		}
	}
}

// TestDataFormatsArePrintable checks that what a terminal would act on,
// in a name and a tag from the server, is escaped in YAML (and decodes to
// the same string) and in a jsonpath template's output (as printable
// writes it), while the template's own newline stays.
func TestDataFormatsArePrintable(t *testing.T) {
	name := "x\x1b[2J\u202ey\u200b\x7f\u0085"
	hostile := strings.Replace(block1, `"name": "load-test"`, `"name": "x\u001b[2J\u202ey\u200b\u007f\u0085"`, 1)
	hostile = strings.Replace(hostile, `{"env": "prod"}`, `{"k\u0007": "v\t"}`, 1)
	url := serveJSON(t, map[string]string{"GET /v1/blocks": `{"blocks": [` + hostile + `]}`})
	unsafe := func(s string) bool {
		return strings.ContainsAny(s, "\x1b\x07\t\x7f\u0085\u202e\u200b")
	}

	got := runApp(t.Context(), nil, "--url", url, "-o", "yaml", "blocks", "list")
	if got.code != 0 || unsafe(got.stdout) {
		t.Fatalf("-o yaml: exit %d, not escaped:\n%q", got.code, got.stdout)
	}
	var decoded struct {
		Blocks []struct {
			Name string
			Tags map[string]string
		}
	}
	if err := yaml.Unmarshal([]byte(got.stdout), &decoded); err != nil {
		t.Fatalf("-o yaml does not decode: %v\n%s", err, got.stdout)
	}
	if len(decoded.Blocks) != 1 || decoded.Blocks[0].Name != name || decoded.Blocks[0].Tags["k\a"] != "v\t" {
		t.Errorf("-o yaml decodes to %+q, want the name %q and the tag k\\a=v\\t", decoded.Blocks, name)
	}

	got = runApp(t.Context(), nil, "--url", url, "-o", `jsonpath={.blocks[0].name}{"\n"}{.blocks[0].tags}{"\n"}`, "blocks", "list")
	want := `x\x1b[2J\u202ey\u200b\x7f\u0085` + "\n" + `{"k\\a":"v\\t"}` + "\n"
	if got.code != 0 || got.stdout != want {
		t.Errorf("-o jsonpath: exit %d, stdout %q, want %q", got.code, got.stdout, want)
	}
}

// TestEscapeYAML checks the escapes escapeYAML writes decode to the
// characters they stand for.
func TestEscapeYAML(t *testing.T) {
	for _, s := range []string{"\u202e", "a\u200bb", "\U000e0001", "\u0085", "plain", "é ü 日本"} {
		out, err := printableYAML(map[string]string{"v": s})
		if err != nil {
			t.Fatal(err)
		}
		if bytes.ContainsAny(out, "\u202e\u200b\U000e0001\u0085") {
			t.Errorf("%q: not escaped: %s", s, out)
		}
		var back map[string]string
		if err := yaml.Unmarshal(out, &back); err != nil || back["v"] != s {
			t.Errorf("%q: %s decodes to %q (%v)", s, out, back["v"], err)
		}
	}
}
