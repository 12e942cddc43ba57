package store

import (
	"strings"
	"unicode/utf8"

	"capblock/internal/core"
)

// decodeCanonicalPlacements reads placements in exactly the form that
// EncodePlacements writes: `null`, or `[` then placements
// `{"node":"NAME","gpus":[N,N,…]}` (or `"gpus":null`) separated by
// commas, then `]`, with no space, NAME without a quote or a backslash,
// each N a decimal integer without sign or leading zero. It reports false
// for any other text, which DecodePlacements then gives to
// encoding/json: the two agree on every text this one accepts
// (FuzzDecodePlacements).
func decodeCanonicalPlacements(text string) ([]core.Placement, bool) {
	if text == "null" {
		return nil, true
	}
	r := placementReader{s: text}
	if !r.take("[") {
		return nil, false
	}
	out := make([]core.Placement, 0, strings.Count(text, `{"node":`))
	for first := true; !r.take("]"); first = false {
		if !first && !r.take(",") {
			return nil, false
		}
		var p core.Placement
		var ok bool
		if !r.take(`{"node":"`) {
			return nil, false
		}
		if p.Node, ok = r.until('"'); !ok || !r.take(`,"gpus":`) {
			return nil, false
		}
		if !r.take("null") {
			if p.GPUs, ok = r.ints(); !ok {
				return nil, false
			}
		}
		if !r.take("}") {
			return nil, false
		}
		out = append(out, p)
	}
	return out, r.s == ""
}

// placementReader reads a text from its start, s being what is left.
type placementReader struct{ s string }

// take consumes prefix if the text starts with it.
func (r *placementReader) take(prefix string) bool {
	if !strings.HasPrefix(r.s, prefix) {
		return false
	}
	r.s = r.s[len(prefix):]
	return true
}

// until consumes the text up to end and end itself, and returns what
// came before; a backslash (an escape), a control character or bytes
// that are not UTF-8 in it are not the canonical form.
func (r *placementReader) until(end byte) (string, bool) {
	i := strings.IndexByte(r.s, end)
	if i < 0 {
		return "", false
	}
	v := r.s[:i]
	for j := 0; j < len(v); j++ {
		if v[j] == '\\' || v[j] < 0x20 {
			return "", false
		}
	}
	if !utf8.ValidString(v) {
		return "", false // encoding/json would replace what is not UTF-8
	}
	r.s = r.s[i+1:]
	return v, true
}

// ints consumes `[N,N,…]`, an empty list included.
func (r *placementReader) ints() ([]int, bool) {
	if !r.take("[") {
		return nil, false
	}
	out := []int{}
	for first := true; !r.take("]"); first = false {
		if !first && !r.take(",") {
			return nil, false
		}
		n, ok := r.int()
		if !ok {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

// int consumes a decimal integer without sign or leading zero, small
// enough not to overflow.
func (r *placementReader) int() (int, bool) {
	i, n := 0, 0
	for i < len(r.s) && r.s[i] >= '0' && r.s[i] <= '9' {
		if i >= 9 || (i > 0 && r.s[0] == '0') {
			return 0, false
		}
		n = n*10 + int(r.s[i]-'0')
		i++
	}
	if i == 0 {
		return 0, false
	}
	r.s = r.s[i:]
	return n, true
}
