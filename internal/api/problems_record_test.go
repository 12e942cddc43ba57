package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"capblock/internal/contract"
)

// Every problem that an operation answers in this package's tests is
// recorded (recordProblems wraps every test API's handler), and TestMain
// fails the run when the served document does not declare one for its
// operation: the document's problems are checked against the answers
// the tests provoke, not only against the table they come from.

func TestMain(m *testing.M) {
	code := m.Run()
	if os.Getenv("CAPBLOCK_LIST_PROBLEMS") != "" {
		answered.list(os.Stderr)
	}
	if code == 0 {
		if missing := answered.undeclared(servedDocument(true)); len(missing) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: %d problems answered in the tests are not declared for their operation in /openapi.json (operationProblems in problems.go):\n", len(missing))
			for _, m := range missing {
				fmt.Fprintln(os.Stderr, "\t"+m)
			}
			code = 1
		}
	}
	os.Exit(code)
}

// observation is a problem answered to a request.
type observation struct {
	op     string
	status int
	code   string
}

// answerLog holds the problems answered, each with the first request that
// got it.
type answerLog struct {
	mu   sync.Mutex
	seen map[observation]string
}

var answered = &answerLog{}

func (l *answerLog) add(o observation, request string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[observation]string{}
	}
	if _, ok := l.seen[o]; !ok {
		l.seen[o] = request
	}
}

// list writes every answer recorded, one a line.
func (l *answerLog) list(w io.Writer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var lines []string
	for o, request := range l.seen {
		lines = append(lines, fmt.Sprintf("%s %d %s (to %s)", o.op, o.status, o.code, request))
	}
	slices.Sort(lines)
	fmt.Fprintf(w, "%d problems answered:\n\t%s\n", len(lines), strings.Join(lines, "\n\t"))
}

// undeclared lists the recorded answers that doc does not declare for
// their operation.
func (l *answerLog) undeclared(doc *document) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for o, request := range l.seen {
		if !doc.declares(o) {
			out = append(out, fmt.Sprintf("%s answered %d %s (to %s)", o.op, o.status, o.code, request))
		}
	}
	slices.Sort(out)
	return out
}

// document is what the served OpenAPI document says of each operation:
// its method and path, and the problem codes it declares per status.
type document struct {
	ops []docOperation
}

type docOperation struct {
	id       string
	method   string
	segments []string // the path's, "{…}" for a parameter
	problems map[int][]string
}

// declares reports whether o's operation declares o's status and code.
func (d *document) declares(o observation) bool {
	for _, op := range d.ops {
		if op.id == o.op {
			return slices.Contains(op.problems[o.status], o.code)
		}
	}
	return false
}

// operation is the operation that serves method and path: the one whose
// path matches with the most literal segments, as the mux picks it.
func (d *document) operation(method, path string) (string, bool) {
	if method == http.MethodHead {
		method = http.MethodGet
	}
	segments := strings.Split(strings.Trim(path, "/"), "/")
	best, bestLiterals := "", -1
	for _, op := range d.ops {
		if op.method != method || len(op.segments) != len(segments) {
			continue
		}
		literals := 0
		for i, s := range op.segments {
			if strings.HasPrefix(s, "{") {
				continue
			}
			if s != segments[i] {
				literals = -1
				break
			}
			literals++
		}
		if literals > bestLiterals {
			best, bestLiterals = op.id, literals
		}
	}
	return best, bestLiterals >= 0
}

var (
	docsOnce sync.Once
	docs     map[bool]*document // by whether the clock is simulated
)

// servedDocument is the document that the API serves on a service with
// a simulated clock (simulated) or not, parsed.
func servedDocument(simulated bool) *document {
	docsOnce.Do(func() {
		docs = map[bool]*document{}
		for _, sim := range []bool{false, true} {
			fake := newFake()
			if sim {
				fake.clock = &fakeClock{now: t0}
			}
			h := New(fake, Options{Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
			req, _ := http.NewRequest(http.MethodGet, "/openapi.json", nil)
			rec := &bufferedWriter{header: http.Header{}}
			h.ServeHTTP(rec, req)
			d, err := parseDocument(rec.body.Bytes())
			if err != nil {
				panic(fmt.Sprintf("the served document: %v", err))
			}
			docs[sim] = d
		}
	})
	return docs[simulated]
}

func parseDocument(body []byte) (*document, error) {
	var raw struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
			Responses   map[string]struct {
				Content map[string]struct {
					Schema struct {
						Properties struct {
							Code struct {
								Enum []string
							}
						}
					}
				}
			}
		}
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, err
	}
	d := &document{}
	for path, item := range raw.Paths {
		for method, op := range item {
			o := docOperation{id: op.OperationID, method: strings.ToUpper(method),
				segments: strings.Split(strings.Trim(path, "/"), "/"), problems: map[int][]string{}}
			for status, resp := range op.Responses {
				n, err := strconv.Atoi(status)
				if err != nil || n < 400 {
					continue
				}
				o.problems[n] = resp.Content[problemJSON].Schema.Properties.Code.Enum
			}
			d.ops = append(d.ops, o)
		}
	}
	return d, nil
}

// recorded is a test API's handler that records the problems it answers.
type recorded struct {
	next http.Handler
	doc  *document // what next serves
}

// recordProblems wraps h, the API on svc.
func recordProblems(svc contract.Front, h http.Handler) http.Handler {
	return &recorded{next: h, doc: servedDocument(svc.Simulated())}
}

// unrecorded is h without the recording: for a fake that fails every
// call with one error, whatever the route, which no real service does.
func unrecorded(h http.Handler) http.Handler {
	if r, ok := h.(*recorded); ok {
		return r.next
	}
	return h
}

func (h *recorded) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tw := &teeWriter{ResponseWriter: w}
	h.next.ServeHTTP(tw, r)
	if tw.status < 400 {
		return
	}
	// The handler's own document: a route it lacks (the clock's without
	// a simulated clock) is no operation of it.
	op, ok := h.doc.operation(r.Method, r.URL.Path)
	if !ok {
		return // no operation: the mux's own 404 and 405
	}
	var p Problem
	if err := json.Unmarshal(tw.body.Bytes(), &p); err != nil || p.Code == "" {
		p.Code = "(not a problem: " + tw.Header().Get("Content-Type") + ")"
	}
	answered.add(observation{op: op, status: tw.status, code: p.Code}, r.Method+" "+r.URL.RequestURI())
}

// teeWriter passes a response on and keeps its status and error body.
type teeWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *teeWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *teeWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.status >= 400 {
		w.body.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

func (w *teeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *teeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// bufferedWriter is a minimal ResponseWriter that keeps the body.
type bufferedWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *bufferedWriter) Header() http.Header         { return w.header }
func (w *bufferedWriter) WriteHeader(code int)        { w.status = code }
func (w *bufferedWriter) Write(b []byte) (int, error) { return w.body.Write(b) }

// TestUndeclaredAnswersAreCaught checks the check: an answer the
// document declares passes, one it does not (a code of another
// operation, a status the operation does not answer) is reported.
func TestUndeclaredAnswersAreCaught(t *testing.T) {
	d := servedDocument(true)
	var log answerLog
	log.add(observation{"getBlock", http.StatusNotFound, CodeNotFound}, "GET /v1/blocks/cb-1")
	log.add(observation{"purchaseBlock", http.StatusConflict, CodeNoCapacity}, "POST /v1/blocks")
	if got := log.undeclared(d); len(got) != 0 {
		t.Errorf("declared answers reported: %q", got)
	}
	log.add(observation{"getBlock", http.StatusConflict, CodeNoCapacity}, "GET /v1/blocks/cb-1")
	log.add(observation{"listInstanceTypes", http.StatusNotFound, CodeNotFound}, "GET /v1/instance-types")
	log.add(observation{"purchaseBlock", http.StatusBadRequest, CodeNoCapacity}, "POST /v1/blocks")
	want := []string{
		"getBlock answered 409 no_capacity (to GET /v1/blocks/cb-1)",
		"listInstanceTypes answered 404 not_found (to GET /v1/instance-types)",
		"purchaseBlock answered 400 no_capacity (to POST /v1/blocks)",
	}
	if got := log.undeclared(d); !slices.Equal(got, want) {
		t.Errorf("undeclared = %q, want %q", got, want)
	}
	for _, tc := range []struct{ method, path, want string }{
		{http.MethodGet, "/v1/blocks/cb-1", "getBlock"},
		{http.MethodHead, "/v1/blocks/cb-1", "getBlock"},
		{http.MethodGet, "/v1/blocks/cb-1/status", "getBlockStatus"},
		{http.MethodGet, "/v1/offerings/price-calendar", "getPriceCalendar"},
		{http.MethodPost, "/v1/admin/clock", "setClock"},
	} {
		if got, ok := d.operation(tc.method, tc.path); !ok || got != tc.want {
			t.Errorf("operation(%s %s) = %q, %v, want %q", tc.method, tc.path, got, ok, tc.want)
		}
	}
	if got, ok := d.operation(http.MethodDelete, "/v1/blocks"); ok {
		t.Errorf("operation(DELETE /v1/blocks) = %q, want none", got)
	}
}

// TestProblemTableNamesOperations checks that every operation in the
// table of problems is one the API serves (with a simulated clock, all
// of them): a renamed or removed operation leaves no stale row.
func TestProblemTableNamesOperations(t *testing.T) {
	d := servedDocument(true)
	for id := range operationProblems {
		found := false
		for _, op := range d.ops {
			found = found || op.id == id
		}
		if !found {
			t.Errorf("operationProblems lists %s, which the API does not serve", id)
		}
	}
}
