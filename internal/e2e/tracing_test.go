package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestPurchaseTraceAcrossReplicas follows one purchase in a real OTLP
// receiver (Jaeger, scripts/jaeger.sh): two replicas on PostgreSQL
// export their spans to it; the purchase is made through the replica
// that does not lead, under a trace context the client sends, and its
// activation, decided at its start, is applied by the leader. The
// client's trace holds,
// in order and each the child of the one before: the request, the
// decision, the commit (on the replica that took the request), the
// action's application and the engine call (on the leader).
func TestPurchaseTraceAcrossReplicas(t *testing.T) {
	jaeger := jaegerBinary(t)
	otlp, query := startJaeger(t, jaeger)
	dsn, rs := startReplicas(t, 2, func(i int) []string {
		return []string{
			"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + otlp,
			"OTEL_BSP_SCHEDULE_DELAY=100", // milliseconds: the test waits for the spans
			"OTEL_SERVICE_NAME=capblock",
			fmt.Sprintf("OTEL_RESOURCE_ATTRIBUTES=service.instance.id=replica-%d", i),
		}
	})
	leader := leaderOf(t, rs)
	other := 1 - leader

	// The client's own trace context: the purchase continues it.
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	client := &http.Client{Transport: headerTransport{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"}}
	s := t0.Add(2 * time.Hour)
	o := (&env{t: t, url: rs[other].url}).exact(searchQuery("h100.8x", 1, 4, s, s.Add(4*time.Hour)), 4, s)
	id, status, code, detail, err := postBlockWith(client, rs[other].url, o.OfferingID, "traced")
	if err != nil || status != http.StatusCreated {
		t.Fatalf("buying: %d %s %s %v", status, code, detail, err)
	}
	t.Logf("bought %s through replica %d; replica %d leads", id, other, leader)
	call(t, rs[other].url, "POST", "/v1/admin/clock", map[string]any{"advance": "3h"}, nil)
	var got block
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && got.State != "active"; time.Sleep(100 * time.Millisecond) {
		call(t, rs[other].url, "GET", "/v1/blocks/"+id, nil, &got)
	}
	if got.State != "active" {
		t.Fatalf("block %s is %q, not active", id, got.State)
	}

	// The chain, as the receiver stored it: each span with its parent.
	// The activation continues the purchase's decision, which bought the
	// block (its commit had ended by then).
	want := []struct{ name, parent, replica string }{
		{"POST /v1/blocks", "", fmt.Sprintf("replica-%d", other)},
		{"service.purchase", "POST /v1/blocks", fmt.Sprintf("replica-%d", other)},
		{"store.commit", "service.purchase", fmt.Sprintf("replica-%d", other)},
		{"outbox.apply activate", "service.purchase", fmt.Sprintf("replica-%d", leader)},
		{"engine.activate", "outbox.apply activate", fmt.Sprintf("replica-%d", leader)},
	}
	var spans map[string]jaegerSpan
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		spans = traceSpans(t, query, traceID)
		missing := ""
		for _, w := range want {
			if _, ok := spans[w.name]; !ok {
				missing = w.name
				break
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			names := make([]string, 0, len(spans))
			for n := range spans {
				names = append(names, n)
			}
			sort.Strings(names)
			if resp, err := http.Get("http://" + query + "/api/services/capblock/operations"); err == nil {
				var b strings.Builder
				_, _ = io.Copy(&b, resp.Body)
				resp.Body.Close()
				t.Logf("operations in the receiver: %s", b.String())
			}
			if conn, err := pgx.Connect(t.Context(), dsn); err == nil {
				rows, _ := conn.Query(t.Context(), `SELECT id || ' ' || state || ' ' || attempts || ' ' || trace || ' ' || last_error FROM actions UNION ALL SELECT id || ' block ' || trace FROM blocks`)
				got, _ := pgx.CollectRows(rows, pgx.RowTo[string])
				t.Logf("actions: %v", got)
				conn.Close(t.Context())
			}
			t.Fatalf("trace %s has no span %q; it has %v", traceID, missing, names)
		}
	}
	for i, w := range want {
		sp := spans[w.name]
		if sp.replica != w.replica {
			t.Errorf("span %q came from %s, want %s", w.name, sp.replica, w.replica)
		}
		if w.parent == "" {
			if sp.parent != "00f067aa0ba902b7" {
				t.Errorf("the request's span has parent %q, want the client's span", sp.parent)
			}
			continue
		}
		if p := spans[w.parent]; sp.parent != p.id {
			t.Errorf("span %q has parent %q, want %q (%s)", w.name, sp.parent, p.id, w.parent)
		}
		if prev := spans[want[i-1].name]; sp.start < prev.start {
			t.Errorf("span %q starts before %q", w.name, want[i-1].name)
		}
	}
	if a, c := spans["outbox.apply activate"], spans["store.commit"]; a.start < c.start+c.duration {
		t.Errorf("the activation was applied before the purchase's commit ended")
	}
}

// headerTransport adds its headers to every request.
type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// jaegerBinary is the receiver of the tracing test: $CAPBLOCK_JAEGER, or
// scripts/jaeger.sh's cache. Without one the test skips, except under
// CI=true.
func jaegerBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs Jaeger and two replicas on PostgreSQL")
	}
	path := os.Getenv("CAPBLOCK_JAEGER")
	if path == "" {
		cache := os.Getenv("CAPBLOCK_CACHE")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache", "capblock")
		}
		path = filepath.Join(cache, "jaeger", "v1.75.0", "jaeger")
	}
	if _, err := os.Stat(path); err != nil {
		msg := fmt.Sprintf("no Jaeger at %s (scripts/jaeger.sh builds it): %v", path, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}

// startJaeger runs Jaeger with in-memory storage on loopback ports of its
// own and returns the OTLP/HTTP receiver's address and the query API's.
func startJaeger(t *testing.T, bin string) (otlp, query string) {
	t.Helper()
	otlp, query, grpc := freeLoopbackAddr(t), freeLoopbackAddr(t), freeLoopbackAddr(t)
	dir := t.TempDir()
	config := fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: []
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
extensions:
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: %s
    grpc:
      endpoint: %s
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`, query, grpc, otlp)
	if err := os.WriteFile(filepath.Join(dir, "jaeger.yaml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", "file:"+filepath.Join(dir, "jaeger.yaml"))
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + query + "/api/services")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if c, err := net.Dial("tcp", otlp); err == nil {
					c.Close()
					return otlp, query
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger did not start:\n%s", logs.String())
		}
	}
}

// jaegerSpan is a span as the test reads it: ids, parent, replica and
// times in microseconds.
type jaegerSpan struct {
	id, parent, replica string
	start, duration     int64
}

// traceSpans reads trace id from Jaeger's query API, by span name (the
// first of each name).
func traceSpans(t *testing.T, query, id string) map[string]jaegerSpan {
	t.Helper()
	resp, err := http.Get("http://" + query + "/api/traces/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil
	}
	var out struct {
		Data []struct {
			Spans []struct {
				SpanID        string `json:"spanID"`
				OperationName string `json:"operationName"`
				StartTime     int64  `json:"startTime"`
				Duration      int64  `json:"duration"`
				ProcessID     string `json:"processID"`
				References    []struct {
					RefType string `json:"refType"`
					SpanID  string `json:"spanID"`
				} `json:"references"`
			} `json:"spans"`
			Processes map[string]struct {
				Tags []struct {
					Key   string `json:"key"`
					Value any    `json:"value"`
				} `json:"tags"`
			} `json:"processes"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("reading trace %s: %v", id, err)
	}
	spans := map[string]jaegerSpan{}
	for _, tr := range out.Data {
		for _, sp := range tr.Spans {
			if _, seen := spans[sp.OperationName]; seen {
				continue
			}
			js := jaegerSpan{id: sp.SpanID, start: sp.StartTime, duration: sp.Duration}
			for _, r := range sp.References {
				if strings.EqualFold(r.RefType, "CHILD_OF") {
					js.parent = r.SpanID
				}
			}
			for _, tag := range tr.Processes[sp.ProcessID].Tags {
				if tag.Key == "service.instance.id" {
					js.replica = fmt.Sprint(tag.Value)
				}
			}
			spans[sp.OperationName] = js
		}
	}
	return spans
}
