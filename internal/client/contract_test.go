package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"capblock/internal/api"
	"capblock/internal/backend/local"
	"capblock/internal/clock"
	"capblock/internal/fleet"
	"capblock/internal/service"
	"capblock/internal/store/sqlite"
)

// The client is written by hand beside the OpenAPI document that the
// server serves. TestClientMatchesDocument holds the two together: it
// calls every exported method of Client, by reflection and with every
// argument filled in (every field of a request struct set), against the
// real API on the real service; records every request the client sends;
// and checks each against the served document: the method and path are
// an operation's, the query parameters are the operation's, with values
// of their type, the body's fields (at every depth) are in the request
// schema with values of their type, and every field of the Go type the
// method returns is in the response schema with a type of the same kind.

const contractFleet = `
currency: USD
instanceTypes:
  - {name: l4.1x, gpuModel: L4, gpusPerInstance: 1, onDemandPrice: "1.00"}
zones:
  - name: zone-a
    racks:
      - name: r1
        nodeGroups:
          - {prefix: l4-, count: 1, gpuModel: L4, gpus: 4}
`

// notFromBody are the methods whose result is not read from a response
// body, and where it is read from instead.
var notFromBody = map[string]string{
	"Now": "the " + NowHeader + " header",
}

// onlyIn are the fields of the client's types that only one operation's
// answer holds, by type and field: the client's Block is the answer of
// every block operation, and of getBlock (BlockDetail) with more. The
// field is checked against that operation, and left out of the others'.
var onlyIn = map[string]string{
	"Block.handovers":   "getBlock",
	"Block.utilisation": "getBlock",
}

// exchange is one request the client sent, and its answer.
type exchange struct {
	method, path string
	query        map[string][]string
	body         []byte
	status       int
	answer       []byte
}

// recorder is a transport that records what passes through it.
type recorder struct {
	mu        sync.Mutex
	exchanges []exchange
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	r.mu.Lock()
	r.exchanges = append(r.exchanges, exchange{method: req.Method, path: req.URL.EscapedPath(), query: req.URL.Query(),
		body: body, status: resp.StatusCode, answer: answer})
	r.mu.Unlock()
	return resp, nil
}

func (r *recorder) take() []exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.exchanges
	r.exchanges = nil
	return out
}

// contractServer runs the real service on a fresh SQLite file with a
// simulated clock behind the API on loopback, and returns its URL and
// the first administrator's token.
func contractServer(t *testing.T) (string, string) {
	t.Helper()
	ctx := context.Background()
	f, err := fleet.Parse([]byte(contractFleet))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "capblock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	log := slog.New(slog.DiscardHandler)
	svc, err := service.New(ctx, service.Config{Fleet: f, Store: st, Backend: local.NewSim(log, f.Nodes),
		Clock: clock.NewSim(time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	tokenPath := filepath.Join(dir, "admin.token")
	if _, err := svc.Bootstrap(ctx, tokenPath); err != nil {
		t.Fatal(err)
	}
	token, err := os.ReadFile(tokenPath)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(svc.Guarded(), api.Options{Logger: log}))
	t.Cleanup(srv.Close)
	return srv.URL, strings.TrimSpace(string(token))
}

func TestClientMatchesDocument(t *testing.T) {
	url, token := contractServer(t)
	doc := fetchDocument(t, url)
	rec := &recorder{}
	c, err := New(url, WithToken(token), WithHTTPClient(&http.Client{Transport: rec}),
		WithSleep(func(context.Context, time.Duration) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	problems := 0
	v := reflect.ValueOf(c)
	for i := range v.NumMethod() {
		m := v.Type().Method(i)
		if m.Type.NumIn() < 2 || m.Type.In(1) != reflect.TypeFor[context.Context]() {
			continue // not a request (BaseURL)
		}
		t.Run(m.Name, func(t *testing.T) {
			args := []reflect.Value{reflect.ValueOf(t.Context())}
			for j := 2; j < m.Type.NumIn(); j++ {
				args = append(args, filled(m.Type.In(j)))
			}
			results := v.Method(i).Call(args)
			exchanges := rec.take()
			if len(exchanges) == 0 {
				t.Fatalf("%s sent no request", m.Name)
			}
			var last *docOperation
			for _, x := range exchanges {
				op := doc.operation(x.method, x.path)
				if op == nil {
					t.Errorf("%s %s: no such operation in the document", x.method, x.path)
					continue
				}
				covered[op.id] = true
				last = op
				for _, problem := range doc.checkRequest(op, x) {
					t.Errorf("%s %s (%s): %s", x.method, x.path, op.id, problem)
				}
				if x.status >= 400 {
					problems++
					var p struct{ Code string }
					_ = json.Unmarshal(x.answer, &p)
					if !slices.Contains(op.problems[x.status], p.Code) {
						t.Errorf("%s %s (%s) answered %d %q, which the document does not declare for it: %s", x.method, x.path, op.id, x.status, p.Code, x.answer)
					}
				}
			}
			if last == nil {
				return
			}
			if where, ok := notFromBody[m.Name]; ok {
				t.Logf("%s reads its result from %s", m.Name, where)
				return
			}
			resp := last.response()
			for _, out := range results[:len(results)-1] {
				if out.Kind() == reflect.Bool {
					continue // from the status (Purchase's created)
				}
				if resp == nil {
					t.Errorf("%s: %s returns %s, but the document's answer has no JSON body", m.Name, last.id, out.Type())
					continue
				}
				doc.answering = last.id
				for _, problem := range doc.checkResult(out.Type(), resp) {
					t.Errorf("%s returns %s from %s: %s", m.Name, out.Type(), last.id, problem)
				}
			}
			// A result decoded from a successful answer with content holds it:
			// a list read under the wrong key comes back empty.
			final := exchanges[len(exchanges)-1]
			if errV := results[len(results)-1]; errV.IsNil() && final.status/100 == 2 && len(results) > 1 {
				if out := results[0]; out.Kind() == reflect.Slice && out.Len() == 0 && hasNonEmptyList(final.answer) {
					t.Errorf("%s returned no %s, but the answer holds some: %s", m.Name, out.Type(), final.answer)
				}
			}
		})
	}
	t.Logf("the client calls %d of the document's %d operations; %d answers were problems, each declared", len(covered), len(doc.ops), problems)
}

// hasNonEmptyList reports whether a JSON object holds a non-empty array.
func hasNonEmptyList(body []byte) bool {
	var obj map[string]any
	if json.Unmarshal(body, &obj) != nil {
		return false
	}
	for _, v := range obj {
		if a, ok := v.([]any); ok && len(a) > 0 {
			return true
		}
	}
	return false
}

// filled is a value of type t with every field set: strings, numbers,
// times and durations non-zero, slices and maps of one element, so that
// no omitempty field is left out of a request.
func filled(t reflect.Type) reflect.Value {
	return fill(t, 0)
}

func fill(t reflect.Type, depth int) reflect.Value {
	v := reflect.New(t).Elem()
	if depth > 6 {
		return v
	}
	switch t {
	case reflect.TypeFor[time.Time]():
		return reflect.ValueOf(time.Date(2027, 3, 2, 10, 0, 0, 0, time.UTC))
	case reflect.TypeFor[time.Duration]():
		return reflect.ValueOf(2 * time.Hour)
	}
	switch t.Kind() {
	case reflect.String:
		v.SetString("x1")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(2)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(2)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(2)
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		p.Elem().Set(fill(t.Elem(), depth+1))
		v.Set(p)
	case reflect.Slice:
		v.Set(reflect.Append(v, fill(t.Elem(), depth+1)))
	case reflect.Map:
		v.Set(reflect.MakeMap(t))
		v.SetMapIndex(fill(t.Key(), depth+1), fill(t.Elem(), depth+1))
	case reflect.Struct:
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				v.Field(i).Set(fill(t.Field(i).Type, depth+1))
			}
		}
	}
	return v
}

// schema is the part of a JSON schema that the check reads.
type schema struct {
	Ref                  string             `json:"$ref"`
	Type                 any                `json:"type"`
	Properties           map[string]*schema `json:"properties"`
	AdditionalProperties any                `json:"additionalProperties"`
	Items                *schema            `json:"items"`
	AllOf                []*schema          `json:"allOf"`
}

type docOperation struct {
	id       string
	method   string
	segments []string
	params   map[string]*schema // query parameters
	body     *schema
	answers  map[string]*schema // by 2xx status
	problems map[int][]string   // the codes declared, by 4xx or 5xx status
}

type document struct {
	ops     []*docOperation
	schemas map[string]*schema
	// answering is the operation whose answer checkResult checks.
	answering string
}

func fetchDocument(t *testing.T, url string) *document {
	t.Helper()
	resp, err := http.Get(url + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /openapi.json: %d %v", resp.StatusCode, err)
	}
	d, err := parseDocument(b)
	if err != nil {
		t.Fatalf("the served document: %v", err)
	}
	return d
}

func parseDocument(b []byte) (*document, error) {
	var raw struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
			Parameters  []struct {
				Name, In string
				Schema   *schema
			}
			RequestBody *struct {
				Content map[string]struct{ Schema *schema }
			} `json:"requestBody"`
			Responses map[string]struct {
				Content map[string]struct{ Schema json.RawMessage }
			}
		}
		Components struct {
			Schemas map[string]*schema
		}
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	d := &document{schemas: raw.Components.Schemas}
	for path, item := range raw.Paths {
		for method, op := range item {
			o := &docOperation{id: op.OperationID, method: strings.ToUpper(method),
				segments: strings.Split(strings.Trim(path, "/"), "/"),
				params:   map[string]*schema{}, answers: map[string]*schema{}, problems: map[int][]string{}}
			for _, p := range op.Parameters {
				if p.In == "query" {
					o.params[p.Name] = p.Schema
				}
			}
			if op.RequestBody != nil {
				o.body = op.RequestBody.Content["application/json"].Schema
			}
			for status, r := range op.Responses {
				if strings.HasPrefix(status, "2") {
					if c, ok := r.Content["application/json"]; ok {
						var sch schema
						if err := json.Unmarshal(c.Schema, &sch); err != nil {
							return nil, err
						}
						o.answers[status] = &sch
					}
				}
				if n, err := strconv.Atoi(status); err == nil && n >= 400 {
					var problem struct {
						Properties struct {
							Code struct{ Enum []string }
						}
					}
					if c, ok := r.Content["application/problem+json"]; ok {
						if err := json.Unmarshal(c.Schema, &problem); err != nil {
							return nil, err
						}
						o.problems[n] = problem.Properties.Code.Enum
					}
				}
			}
			d.ops = append(d.ops, o)
		}
	}
	return d, nil
}

// operation is the operation that serves method and path, the one with
// the most literal segments as the server's mux picks it; nil if none.
func (d *document) operation(method, path string) *docOperation {
	segments := strings.Split(strings.Trim(path, "/"), "/")
	var best *docOperation
	bestLiterals := -1
	for _, op := range d.ops {
		if op.method != method || len(op.segments) != len(segments) {
			continue
		}
		literals := 0
		for i, s := range op.segments {
			if strings.HasPrefix(s, "{") {
				if segments[i] == "" {
					literals = -1
					break
				}
				continue
			}
			if s != segments[i] {
				literals = -1
				break
			}
			literals++
		}
		if literals > bestLiterals {
			best, bestLiterals = op, literals
		}
	}
	return best
}

// response is the operation's success body schema: its default status's
// (the lowest 2xx with one).
func (op *docOperation) response() *schema {
	var statuses []string
	for s := range op.answers {
		statuses = append(statuses, s)
	}
	slices.Sort(statuses)
	if len(statuses) == 0 {
		return nil
	}
	return op.answers[statuses[0]]
}

// resolve follows $ref and merges allOf into one schema.
func (d *document) resolve(s *schema) *schema {
	for s != nil && s.Ref != "" {
		s = d.schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")]
	}
	if s == nil || len(s.AllOf) == 0 {
		return s
	}
	merged := &schema{Type: s.Type, Properties: map[string]*schema{}, AdditionalProperties: s.AdditionalProperties, Items: s.Items}
	for _, part := range append(slices.Clone(s.AllOf), &schema{Properties: s.Properties}) {
		part = d.resolve(part)
		if part == nil {
			continue
		}
		if merged.Type == nil {
			merged.Type = part.Type
		}
		for k, p := range part.Properties {
			merged.Properties[k] = p
		}
		if merged.Items == nil {
			merged.Items = part.Items
		}
		if merged.AdditionalProperties == nil {
			merged.AdditionalProperties = part.AdditionalProperties
		}
	}
	return merged
}

// types is the schema's type list; empty means any.
func (s *schema) types() []string {
	switch t := s.Type.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			if str, ok := x.(string); ok {
				out = append(out, str)
			}
		}
		return out
	}
	if len(s.Properties) > 0 {
		return []string{"object"}
	}
	return nil
}

func (s *schema) allows(kind string) bool {
	ts := s.types()
	return len(ts) == 0 || slices.Contains(ts, kind) || (kind == "integer" && slices.Contains(ts, "number"))
}

// additional is the schema of a map's values, nil if the object has none.
func (d *document) additional(s *schema) *schema {
	switch a := s.AdditionalProperties.(type) {
	case map[string]any:
		b, _ := json.Marshal(a)
		var out schema
		_ = json.Unmarshal(b, &out)
		return &out
	case bool:
		if a {
			return &schema{}
		}
	}
	return nil
}

// checkRequest lists how a request differs from its operation.
func (d *document) checkRequest(op *docOperation, x exchange) []string {
	var problems []string
	for name, values := range x.query {
		s, ok := op.params[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("query parameter %q is not the operation's", name))
			continue
		}
		s = d.resolve(s)
		if len(values) > 1 && !s.allows("array") {
			problems = append(problems, fmt.Sprintf("query parameter %q is repeated, but is not an array", name))
		}
		if s.allows("array") && s.Items != nil {
			s = d.resolve(s.Items)
		}
		for _, v := range values {
			if p := checkScalar(s, v); p != "" {
				problems = append(problems, fmt.Sprintf("query parameter %q=%q: %s", name, v, p))
			}
		}
	}
	if len(x.body) == 0 {
		return problems
	}
	if op.body == nil {
		return append(problems, "sends a body, but the operation takes none")
	}
	var v any
	if err := json.Unmarshal(x.body, &v); err != nil {
		return append(problems, "the body is not JSON: "+err.Error())
	}
	return append(problems, d.checkValue(v, op.body, "body")...)
}

// checkScalar says how a query value does not fit s, or "".
func checkScalar(s *schema, v string) string {
	switch {
	case s.allows("string"):
		return ""
	case s.allows("integer") && !s.allows("number"):
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return "not an integer"
		}
	case s.allows("number"):
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return "not a number"
		}
	case s.allows("boolean"):
		if _, err := strconv.ParseBool(v); err != nil {
			return "not a boolean"
		}
	}
	return ""
}

// checkValue lists how a JSON value differs from s, at where.
func (d *document) checkValue(v any, s *schema, where string) []string {
	s = d.resolve(s)
	if s == nil {
		return []string{where + ": the document's schema is missing"}
	}
	switch v := v.(type) {
	case map[string]any:
		if !s.allows("object") {
			return []string{fmt.Sprintf("%s: an object, the document says %v", where, s.Type)}
		}
		var problems []string
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			p, ok := s.Properties[k]
			if !ok {
				p = d.additional(s)
			}
			if p == nil {
				problems = append(problems, fmt.Sprintf("%s.%s: no such field in the document", where, k))
				continue
			}
			problems = append(problems, d.checkValue(v[k], p, where+"."+k)...)
		}
		return problems
	case []any:
		if !s.allows("array") {
			return []string{fmt.Sprintf("%s: an array, the document says %v", where, s.Type)}
		}
		var problems []string
		for i, e := range v {
			if s.Items != nil {
				problems = append(problems, d.checkValue(e, s.Items, fmt.Sprintf("%s[%d]", where, i))...)
			}
		}
		return problems
	case string:
		if !s.allows("string") {
			return []string{fmt.Sprintf("%s: a string, the document says %v", where, s.Type)}
		}
	case float64:
		kind := "number"
		if v == float64(int64(v)) {
			kind = "integer"
		}
		if !s.allows(kind) && !s.allows("number") {
			return []string{fmt.Sprintf("%s: a number, the document says %v", where, s.Type)}
		}
	case bool:
		if !s.allows("boolean") {
			return []string{fmt.Sprintf("%s: a boolean, the document says %v", where, s.Type)}
		}
	case nil:
		if !s.allows("null") {
			return []string{fmt.Sprintf("%s: null, the document says %v", where, s.Type)}
		}
	}
	return nil
}

// checkResult lists how a method's result type t differs from the
// answer's schema s: t is the whole body, or one field of it (a list
// under its key, a block beside its refund).
func (d *document) checkResult(t reflect.Type, s *schema) []string {
	direct := d.checkType(t, s, t.String())
	if len(direct) == 0 {
		return nil
	}
	s = d.resolve(s)
	for _, p := range s.Properties {
		if len(d.checkType(t, p, t.String())) == 0 {
			return nil
		}
	}
	return append(direct, "nor is it any one field of the answer")
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// checkType lists how values of Go type t, as encoding/json decodes them,
// differ from s, at where.
func (d *document) checkType(t reflect.Type, s *schema, where string) []string {
	s = d.resolve(s)
	if s == nil {
		return []string{where + ": the document's schema is missing"}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	want := func(kind string) []string {
		if s.allows(kind) {
			return nil
		}
		return []string{fmt.Sprintf("%s: %s (%s), the document says %v", where, t, kind, s.Type)}
	}
	switch {
	case t == timeType:
		return want("string")
	case t == rawType || t.Kind() == reflect.Interface:
		return nil
	}
	switch t.Kind() {
	case reflect.String:
		return want("string")
	case reflect.Bool:
		return want("boolean")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return want("integer")
	case reflect.Float32, reflect.Float64:
		return want("number")
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return want("string")
		}
		if p := want("array"); p != nil {
			return p
		}
		if s.Items == nil {
			return nil
		}
		return d.checkType(t.Elem(), s.Items, where+"[]")
	case reflect.Map:
		if p := want("object"); p != nil {
			return p
		}
		if a := d.additional(s); a != nil {
			return d.checkType(t.Elem(), a, where+"[]")
		}
		return nil
	case reflect.Struct:
		if p := want("object"); p != nil {
			return p
		}
		var problems []string
		for name, f := range jsonFields(t) {
			p, ok := s.Properties[name]
			if !ok {
				// encoding/json matches a key in any letter case.
				for k, q := range s.Properties {
					if strings.EqualFold(k, name) {
						p, ok = q, true
					}
				}
			}
			if op, only := onlyIn[t.Name()+"."+name]; !ok && only && op != d.answering {
				continue
			}
			if !ok {
				problems = append(problems, fmt.Sprintf("%s.%s: no such field in the document", where, name))
				continue
			}
			problems = append(problems, d.checkType(f, p, where+"."+name)...)
		}
		slices.Sort(problems)
		return problems
	}
	return nil
}

// jsonFields are the fields of struct t as encoding/json names them,
// embedded structs' included.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, ok := out[k]; !ok {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}
