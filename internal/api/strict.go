package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
)

// Request bodies are matched exactly (API.md): an unknown key, a key in
// another letter case than the schema's, or a key given twice is a 400
// that names it, at every level of every operation's body.
//
// huma validates a body decoded into generic maps against the operation's
// schema, then decodes it again with encoding/json into the handler's
// input. By default the two disagree: the validator lets a key through
// when it equals a property's name in another case, without checking its
// value, and encoding/json, which matches keys case-insensitively and
// keeps the last of duplicates, then decodes it over the property. So
// "NAME" with 5,000 characters beside a valid "name", or 2,001 items under
// "Command", reached the handlers unchecked. Two pieces close the gap,
// both here and applied to every operation:
//
//  1. huma validates with ValidateStrictCasing: a key is a property only
//     when it is spelled exactly so, and anything else in an object of the
//     schema is an unexpected property. Maps (tags, env) keep free-form
//     keys; encoding/json decodes map keys exactly, so a map cannot hide a
//     key from the validator.
//  2. The JSON format decodes with decodeJSON, which refuses an object
//     that holds one key twice, maps included. Two spellings of one
//     property in different cases are already refused by 1; in a map they
//     are two distinct keys.
//
// decodeJSON also refuses a body that is not valid UTF-8: encoding/json
// would read each bad byte as U+FFFD, so a name sent with a raw 0xff was
// stored changed instead of refused.

var installStrictBodies sync.Once

// useStrictBodies makes huma's validation of request bodies case-sensitive.
// huma keeps the switch in a package variable, so it is set once for the
// process, before the first handler serves.
func useStrictBodies() {
	installStrictBodies.Do(func() {
		huma.ValidateStrictCasing = true
	})
}

// decodeJSON is the JSON format's Unmarshal: encoding/json's, after
// checks that data is valid UTF-8 and that no object in it gives a key
// twice. huma decodes each body twice (into generic values to validate,
// then into the input), and both pass through here.
func decodeJSON(data []byte, v any) error {
	if err := checkUTF8(data); err != nil {
		return err
	}
	if err := checkDuplicateKeys(data); err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// errInvalidUTF8 is wrapped by the error of checkUTF8.
var errInvalidUTF8 = errors.New("not valid UTF-8")

// checkUTF8 returns an error that gives the first byte of data that is
// not valid UTF-8 and its offset, or nil when data is valid UTF-8.
func checkUTF8(data []byte) error {
	if utf8.Valid(data) {
		return nil
	}
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			return fmt.Errorf("%w: byte 0x%02x at offset %d", errInvalidUTF8, data[i], i)
		}
		i += size
	}
	return errInvalidUTF8 // not reached: utf8.Valid found a bad byte
}

// errDuplicateKey is wrapped by the error of checkDuplicateKeys.
var errDuplicateKey = errors.New("key given twice")

// jsonScope is an object or array that checkDuplicateKeys is inside.
type jsonScope struct {
	segment string          // its place in its parent: ".tags", "[2]"
	keys    map[string]bool // an object's keys so far; nil for an array
	key     bool            // an object expects a key (or its end) next
	length  int             // an array's items so far
}

// checkDuplicateKeys returns an error naming the first key that an object
// of data gives twice, with its path ("body.tags.env"). Keys are compared
// as decoded ("n\u0061me" is "name"). It reads the bytes once, without
// decoding values, and leaves syntax errors to json.Unmarshal, which
// reports them better: on anything that is not JSON it returns nil.
func checkDuplicateKeys(data []byte) error {
	var (
		stack   []*jsonScope
		lastKey string // the key of the value an object reads next
	)
	for i := 0; i < len(data); {
		c := data[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == ':' {
			i++
			continue
		}
		var top *jsonScope
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		// 1. In an object: a key, or the object's end.
		if top != nil && top.key {
			if c == '}' {
				stack = stack[:len(stack)-1]
				valueRead(stack)
				i++
				continue
			}
			end := stringEnd(data, i)
			if end < 0 {
				return nil
			}
			key, ok := decodeKey(data[i:end])
			if !ok {
				return nil
			}
			if top.keys[key] {
				return fmt.Errorf("%w: %s", errDuplicateKey, jsonPath(stack, "."+key))
			}
			top.keys[key] = true
			top.key = false
			lastKey = key
			i = end
			continue
		}
		// 2. A value, or an array's end.
		switch c {
		case '{', '[':
			scope := &jsonScope{}
			if c == '{' {
				scope.keys, scope.key = map[string]bool{}, true
			}
			switch {
			case top == nil:
			case top.keys != nil:
				scope.segment = "." + lastKey
			default:
				scope.segment = "[" + strconv.Itoa(top.length) + "]"
			}
			stack = append(stack, scope)
			i++
		case ']':
			if top == nil || top.keys != nil {
				return nil
			}
			stack = stack[:len(stack)-1]
			valueRead(stack)
			i++
		case '"':
			if i = stringEnd(data, i); i < 0 {
				return nil
			}
			valueRead(stack)
		default: // a number, true, false or null
			start := i
			for i < len(data) && !endsLiteral(data[i]) {
				i++
			}
			if i == start {
				return nil
			}
			valueRead(stack)
		}
	}
	return nil
}

// endsLiteral reports whether c ends a number, true, false or null.
func endsLiteral(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', ':', ']', '}':
		return true
	}
	return false
}

// stringEnd returns the index after the string literal that starts at
// data[i], or -1 when there is none.
func stringEnd(data []byte, i int) int {
	if data[i] != '"' {
		return -1
	}
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// decodeKey returns the string that the literal raw spells, as
// encoding/json decodes it (escapes resolved, invalid UTF-8 replaced).
func decodeKey(raw []byte) (string, bool) {
	plain := true
	for _, c := range raw[1 : len(raw)-1] {
		if c == '\\' || c >= utf8.RuneSelf || c < ' ' {
			plain = false
			break
		}
	}
	if plain {
		return string(raw[1 : len(raw)-1]), true
	}
	var key string
	if err := json.Unmarshal(raw, &key); err != nil {
		return "", false
	}
	return key, true
}

// jsonPath names a key of the innermost scope of stack: "body.tags.env".
func jsonPath(stack []*jsonScope, last string) string {
	var b strings.Builder
	b.WriteString("body")
	for _, s := range stack {
		b.WriteString(s.segment)
	}
	b.WriteString(last)
	return b.String()
}

// valueRead notes that the innermost scope read one value.
func valueRead(stack []*jsonScope) {
	if len(stack) == 0 {
		return
	}
	top := stack[len(stack)-1]
	if top.keys != nil {
		top.key = true
		return
	}
	top.length++
}
