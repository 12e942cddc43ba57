package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRequestKeysMatchExactly sends bodies whose keys differ from the
// schema's only in case, are unknown, or come twice: each is a 400 that
// names the key, and the service is never called.
func TestRequestKeysMatchExactly(t *testing.T) {
	long := `"` + strings.Repeat("x", 5000) + `"`
	items := `[` + strings.Repeat(`"a",`, 2000) + `"a"]`
	tests := map[string]struct {
		token, method, target, body string
		want                        wantProblem
	}{
		"NAME beside name": {
			method: http.MethodPost, target: "/v1/blocks",
			body: `{"offeringId": "cbo-abc.sig", "clientToken": "t", "name": "ok", "NAME": ` + long + `}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body.NAME: unexpected property"},
		},
		"NAME alone": {
			method: http.MethodPost, target: "/v1/blocks",
			body: `{"offeringId": "cbo-abc.sig", "clientToken": "t", "NAME": ` + long + `}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body.NAME: unexpected property"},
		},
		"a key that folds to a property's name": {
			// encoding/json folds ſ (U+017F) to s.
			method: http.MethodPost, target: "/v1/blocks",
			body: `{"offeringId": "cbo-abc.sig", "clientToken": "t", "tagſ": {"a": "b"}}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body.tagſ: unexpected property"},
		},
		"Command beside command": {
			method: http.MethodPost, target: "/v1/jobs",
			body: `{"blockId": "cb-1", "command": ["true"], "Command": ` + items + `}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body.Command: unexpected property"},
		},
		"unknown key": {
			method: http.MethodPost, target: "/v1/blocks",
			body: `{"offeringId": "cbo-abc.sig", "clientToken": "t", "colour": "red"}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body.colour: unexpected property"},
		},
		"duplicate key": {
			method: http.MethodPost, target: "/v1/blocks",
			body: `{"offeringId": "cbo-abc.sig", "clientToken": "t", "name": "ok", "name": ` + long + `}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "key given twice: body.name"},
		},
		"duplicate key spelled with an escape": {
			method: http.MethodPost, target: "/v1/blocks",
			body: `{"offeringId": "cbo-abc.sig", "clientToken": "t", "name": "ok", "n\u0061me": "again"}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "key given twice: body.name"},
		},
		"duplicate key in a map": {
			method: http.MethodPost, target: "/v1/blocks",
			body: `{"offeringId": "cbo-abc.sig", "clientToken": "t", "tags": {"env": "prod", "env": "dev"}}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "key given twice: body.tags.env"},
		},
		"nested key in another case": {
			token: adminToken, method: http.MethodPut, target: "/v1/teams/team-1/budget",
			body: `{"amount": {"amount": "1.00", "currency": "USD", "Currency": "EUR"}, "period": "month"}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body.amount.Currency: unexpected property"},
		},
		"nested key in another case only": {
			token: adminToken, method: http.MethodPut, target: "/v1/teams/team-1/budget",
			body: `{"amount": {"Amount": "1.00", "currency": "USD"}, "period": "month"}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body.amount.Amount: unexpected property"},
		},
		"nested unknown key": {
			token: adminToken, method: http.MethodPut, target: "/v1/teams/team-1/budget",
			body: `{"amount": {"amount": "1.00", "currency": "USD", "cents": 5}, "period": "month"}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body.amount.cents: unexpected property"},
		},
		"nested duplicate key": {
			token: adminToken, method: http.MethodPut, target: "/v1/teams/team-1/budget",
			body: `{"amount": {"amount": "1.00", "currency": "USD", "amount": "99999999.00"}, "period": "month"}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "key given twice: body.amount.amount"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fake := newFake()
			a := newTestAPI(t, fake, Options{})
			token := tc.token
			if token == "" {
				token = memberToken
			}
			checkProblem(t, a.doAs(t, token, tc.method, tc.target, tc.body), tc.want)
			if fake.gotPurchase.ClientToken != "" {
				t.Errorf("the service was called with %+v", fake.gotPurchase)
			}
		})
	}
}

// TestRequestKeysExactStillServe checks that well-formed bodies still pass,
// and that map keys stay free-form: keys that differ only in case are two
// tags.
func TestRequestKeysExactStillServe(t *testing.T) {
	fake := newFake()
	a := newTestAPI(t, fake, Options{})
	r := a.do(t, http.MethodPost, "/v1/blocks", `{"offeringId": "cbo-abc.sig", "clientToken": "t", "name": "n", "tags": {"env": "prod", "Env": "dev"}}`)
	if r.status != http.StatusCreated {
		t.Fatalf("purchase: status %d: %s", r.status, r.body)
	}
	if diff := cmp.Diff(map[string]string{"env": "prod", "Env": "dev"}, fake.gotPurchase.Tags); diff != "" {
		t.Errorf("tags (-want +got):\n%s", diff)
	}

	r = a.doAs(t, adminToken, http.MethodPut, "/v1/teams/team-1/budget", `{"amount": {"amount": "1000.00", "currency": "USD"}, "period": "month"}`)
	checkJSON(t, r, http.StatusOK, `{"amount": {"amount": "1000.00", "currency": "USD"}, "period": "month"}`)
}

// TestRequestBodyMustBeUTF8: a body that is not valid UTF-8 is a 400
// that says so and gives the first bad byte, and the service is never
// called: the decoder would have read the byte as U+FFFD and the name
// would have been stored changed.
func TestRequestBodyMustBeUTF8(t *testing.T) {
	const head = `{"offeringId": "cbo-abc.sig", "clientToken": "t", `
	tests := map[string]struct {
		body string
		want string // a substring of the detail
	}{
		"0xff in the name": {
			body: head + "\"name\": \"a\xffb\"}",
			want: fmt.Sprintf("body: not valid UTF-8: byte 0xff at offset %d", len(head)+10),
		},
		"0xfe in a tag key": {
			body: head + "\"tags\": {\"te\xfeam\": \"ml\"}}",
			want: "body: not valid UTF-8: byte 0xfe",
		},
		"a sequence cut short": {
			body: head + "\"name\": \"caf\xc3\"}",
			want: "body: not valid UTF-8: byte 0xc3",
		},
		"an overlong slash": {
			body: head + "\"name\": \"a\xc0\xafb\"}",
			want: "body: not valid UTF-8: byte 0xc0",
		},
		"a surrogate half": {
			body: head + "\"name\": \"\xed\xa0\x80\"}",
			want: "body: not valid UTF-8: byte 0xed",
		},
		"outside a string": {
			body: head + "\"name\": \"n\"\xff}",
			want: "body: not valid UTF-8: byte 0xff",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fake := newFake()
			a := newTestAPI(t, fake, Options{})
			checkProblem(t, a.do(t, http.MethodPost, "/v1/blocks", tc.body), wantProblem{http.StatusBadRequest, CodeInvalidArgument, tc.want})
			if fake.gotPurchase.ClientToken != "" {
				t.Errorf("the service was called with %+v", fake.gotPurchase)
			}
		})
	}
	// Text of any script, as valid UTF-8, still buys.
	fake := newFake()
	a := newTestAPI(t, fake, Options{})
	r := a.do(t, http.MethodPost, "/v1/blocks", head+`"name": "entraînement 训练 👩‍💻"}`)
	if r.status != http.StatusCreated || fake.gotPurchase.Name != "entraînement 训练 👩‍💻" {
		t.Fatalf("a valid UTF-8 name: status %d, name %q: %s", r.status, fake.gotPurchase.Name, r.body)
	}
}

func TestCheckDuplicateKeys(t *testing.T) {
	tests := map[string]struct {
		body string
		want string // the path named; "" for none
	}{
		"flat":                   {body: `{"a": 1, "b": 2}`},
		"same key in siblings":   {body: `{"a": {"x": 1}, "b": {"x": 1}, "c": [{"x": 1}, {"x": 2}]}`},
		"case variants":          {body: `{"a": 1, "A": 2}`},
		"scalars and nesting":    {body: `[1, "a", true, null, [], {}, [[{"a": [1, {"a": 2}]}]]]`},
		"syntax error":           {body: `{"a": 1, "b"`},
		"top level":              {body: `{"a": 1, "b": 2, "a": 3}`, want: "body.a"},
		"after a nested object":  {body: `{"a": {"b": {"c": 1}}, "d": [], "a": 2}`, want: "body.a"},
		"in an object":           {body: `{"a": {"b": 1, "b": 2}}`, want: "body.a.b"},
		"in an array item":       {body: `{"a": [{"b": 1}, {"b": 1, "b": 2}]}`, want: "body.a[1].b"},
		"in a nested array":      {body: `[[], [0, {"x": {"y": 1, "y": 1}}]]`, want: "body[1][1].x.y"},
		"empty key twice":        {body: `{"": 1, "": 2}`, want: "body."},
		"escaped spelling twice": {body: `{"k\u00e9": 1, "ké": 2}`, want: "body.ké"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := checkDuplicateKeys([]byte(tc.body))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				return
			}
			if !errors.Is(err, errDuplicateKey) || err.Error() != "key given twice: "+tc.want {
				t.Errorf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
}

// duplicateKeyByTokens is checkDuplicateKeys written plainly on
// json.Decoder's tokens, slower: the fuzz test holds the two equal.
func duplicateKeyByTokens(data []byte) string {
	type scope struct {
		path   string
		keys   map[string]bool
		key    bool
		length int
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var (
		stack   []*scope
		lastKey string
	)
	read := func() {
		if len(stack) == 0 {
			return
		}
		if top := stack[len(stack)-1]; top.keys != nil {
			top.key = true
		} else {
			top.length++
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		var top *scope
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.key {
			if tok == json.Delim('}') {
				stack = stack[:len(stack)-1]
				read()
				continue
			}
			key := tok.(string)
			if top.keys[key] {
				return top.path + "." + key
			}
			top.keys[key], top.key, lastKey = true, false, key
			continue
		}
		path := "body"
		if top != nil && top.keys != nil {
			path = top.path + "." + lastKey
		} else if top != nil {
			path = fmt.Sprintf("%s[%d]", top.path, top.length)
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &scope{path: path, keys: map[string]bool{}, key: true})
		case json.Delim('['):
			stack = append(stack, &scope{path: path})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			read()
		default:
			read()
		}
	}
}

func FuzzCheckDuplicateKeys(f *testing.F) {
	for _, s := range []string{
		`{"a": 1, "b": [true, null, -1.5e3, "x\"y"], "a": 2}`,
		`{"a": {"b": [{"c": 1}, {"c": 1, "c": 2}]}}`,
		`[[], {}, [{"k\u00e9": 1, "ké": 2}]]`,
		`{"a\\": 1, "a\\": 2}`,
		`{"\ud800": 1, "\udfff": 2}`,
		"{\"a\xff\": 1, \"a\xfe\": 2}",
		`"just a string"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if !json.Valid([]byte(body)) {
			checkDuplicateKeys([]byte(body)) // must not panic
			return
		}
		var got string
		if err := checkDuplicateKeys([]byte(body)); err != nil {
			got = strings.TrimPrefix(err.Error(), errDuplicateKey.Error()+": ")
		}
		if want := duplicateKeyByTokens([]byte(body)); got != want {
			t.Errorf("checkDuplicateKeys(%q) names %q, want %q", body, got, want)
		}
	})
}

func BenchmarkCheckDuplicateKeys(b *testing.B) {
	body := []byte(`{"command": [` + strings.Repeat(`"argument-xyz",`, 70000) + `"x"], "env": {"a": "b"}}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := checkDuplicateKeys(body); err != nil {
			b.Fatal(err)
		}
	}
}
