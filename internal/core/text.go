package core

import (
	"unicode"
	"unicode/utf8"
)

// CheckPrintable refuses text that users name things with (a block's or a
// plan's name, a tag's key or value, a job's name) unless it is printable
// UTF-8: invalid UTF-8, control characters (category Cc: NUL, escape,
// newline, …), format characters (category Cf: the bidirectional
// overrides and isolates such as U+202E, zero-width spaces, the byte order
// mark, the invisible tag characters) and the line and paragraph
// separators are refused, since they hide or reorder what a terminal, a
// log line or the console shows. The zero-width joiner and non-joiner stay
// allowed: scripts and emoji sequences need them. The error wraps
// ErrInvalidArgument and names field.
func CheckPrintable(field, s string) error {
	for i, n := 0, 1; i < len(s); n++ {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return Invalidf("%s: byte 0x%02x at position %d is not valid UTF-8; use printable text", field, s[i], n)
		}
		if !printable(r) {
			return Invalidf("%s: character %U at position %d is a control or formatting character; use printable text", field, r, n)
		}
		i += size
	}
	return nil
}

// printable reports whether r may appear in a name (see CheckPrintable).
func printable(r rune) bool {
	switch {
	case r == '\u200c' || r == '\u200d': // zero-width non-joiner and joiner
		return true
	case unicode.Is(unicode.Cc, r), unicode.Is(unicode.Cf, r),
		unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r):
		return false
	}
	return true
}
