package slurm

import (
	"fmt"
	"strconv"
	"strings"
)

// expandHostlist expands a Slurm host list, as scontrol prints a
// reservation's nodes ("sim[0-2,5],gpu-a07", "r[1-2]n[01-02]"), into
// its names in order. "(null)" and "" are no nodes.
func expandHostlist(s string) ([]string, error) {
	if s == "" || s == "(null)" {
		return nil, nil
	}
	var out []string
	for _, item := range splitTop(s) {
		names, err := expandHost(item)
		if err != nil {
			return nil, fmt.Errorf("host list %q: %w", s, err)
		}
		out = append(out, names...)
	}
	return out, nil
}

// splitTop splits s at the commas outside brackets.
func splitTop(s string) []string {
	var parts []string
	depth, from := 0, 0
	for i := range len(s) {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[from:i])
				from = i + 1
			}
		}
	}
	return append(parts, s[from:])
}

// expandHost expands one name with bracketed ranges, each bracket in
// turn (so "r[1-2]n[1-2]" is r1n1, r1n2, r2n1, r2n2). A range keeps its
// low bound's width: [08-10] is 08, 09, 10.
func expandHost(s string) ([]string, error) {
	open := strings.IndexByte(s, '[')
	if open < 0 {
		if s == "" || strings.ContainsAny(s, "]") {
			return nil, fmt.Errorf("bad name %q", s)
		}
		return []string{s}, nil
	}
	end := strings.IndexByte(s[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("unclosed '[' in %q", s)
	}
	prefix, ranges, rest := s[:open], s[open+1:open+end], s[open+end+1:]
	tails, err := expandHost("x" + rest) // rest may be empty or hold more brackets
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range strings.Split(ranges, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, errA := strconv.Atoi(lo)
		b, errB := strconv.Atoi(hi)
		if errA != nil || errB != nil || a > b || a < 0 {
			return nil, fmt.Errorf("bad range %q in %q", r, s)
		}
		for i := a; i <= b; i++ {
			n := fmt.Sprintf("%0*d", len(lo), i)
			for _, t := range tails {
				out = append(out, prefix+n+t[1:])
			}
		}
	}
	return out, nil
}
