package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

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
// "Command", reached the handlers unchecked. Two settings close the gap,
// both made here and applied to every operation:
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

var installStrictBodies sync.Once

// useStrictBodies makes huma's validation of request bodies case-sensitive.
// huma keeps the switch in a package variable, so it is set once for the
// process, before the first handler serves.
func useStrictBodies() {
	installStrictBodies.Do(func() {
		huma.ValidateStrictCasing = true
	})
}

// decodeJSON is the JSON format's Unmarshal: encoding/json's, after a
// check that no object in data gives a key twice. huma decodes each body
// twice (into generic values to validate, then into the input), and both
// pass through here.
func decodeJSON(data []byte, v any) error {
	if err := checkDuplicateKeys(data); err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// errDuplicateKey is wrapped by the error of checkDuplicateKeys.
var errDuplicateKey = errors.New("key given twice")

// jsonScope is an object or array being read by checkDuplicateKeys.
type jsonScope struct {
	path   string          // "body.tags"
	keys   map[string]bool // an object's keys so far; nil for an array
	key    bool            // an object expects a key next
	length int             // an array's items so far
}

// child is the path of the value the scope reads next.
func (s *jsonScope) child(key string) string {
	if s.keys == nil {
		return s.path + "[" + strconv.Itoa(s.length) + "]"
	}
	return s.path + "." + key
}

// checkDuplicateKeys returns an error naming the first key that an object
// of data gives twice, with its path ("body.tags.env"). It leaves syntax
// errors to json.Unmarshal, which reports them better.
func checkDuplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers are not looked at; skip parsing them
	var (
		stack   []*jsonScope
		lastKey string
	)
	for {
		tok, err := dec.Token()
		if err != nil {
			// io.EOF after the last value, or a syntax error, which
			// json.Unmarshal reports.
			return nil
		}
		var top *jsonScope
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		// 1. A key, or the end of an object.
		if top != nil && top.key {
			if tok == json.Delim('}') {
				stack = stack[:len(stack)-1]
				valueRead(stack)
				continue
			}
			key, _ := tok.(string)
			if top.keys[key] {
				return fmt.Errorf("%w: %s", errDuplicateKey, top.child(key))
			}
			top.keys[key] = true
			top.key = false
			lastKey = key
			continue
		}
		// 2. A value, or the end of an array.
		path := "body"
		if top != nil {
			path = top.child(lastKey)
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &jsonScope{path: path, keys: map[string]bool{}, key: true})
		case json.Delim('['):
			stack = append(stack, &jsonScope{path: path})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueRead(stack)
		default:
			valueRead(stack)
		}
	}
}

// valueRead notes that the innermost open scope read one value.
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
