package main

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// printable returns s with each character that a terminal would act on
// instead of show written as its Go escape: control characters (ESC, BEL,
// CR, tab, newline, DEL and the C1 range: "\x1b", "\a", "\u009b"), format
// and other invisible characters (U+202E RIGHT-TO-LEFT OVERRIDE, zero-width
// spaces: "\u202e"), and bytes that are not UTF-8 ("\xff"). Printable
// UTF-8 and the ASCII space are unchanged; a backslash is left as is.
//
// Every text the CLI prints from the server (names, tags, ids, error
// details) passes through here, so that a block named "x\x1b[2J" cannot
// clear the screen, move the cursor, hide text or break a table's columns
// on the terminal of whoever lists it. Job logs are the exception (see
// jobsLogsCmd).
func printable(s string) string {
	if isPrintable(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case shownAsIs(r):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRune(r) // '\x1b', '\u202e', '\n'
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// shownAsIs reports whether a terminal shows r as a character: letters,
// marks, numbers, punctuation, symbols and the ASCII space.
func shownAsIs(r rune) bool { return strconv.IsPrint(r) }

// isPrintable reports whether printable would return s unchanged.
func isPrintable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return isPrintableUTF8(s[i:])
		}
	}
	return true
}

func isPrintableUTF8(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || !shownAsIs(r) {
			return false
		}
		i += size
	}
	return true
}

// printableJSON rewrites JSON that encoding/json wrote so that it is
// printable too: encoding/json escapes control characters below U+0020,
// but writes DEL, the C1 controls and invisible characters such as U+202E
// as they are. Each of those becomes a \u escape, which decodes to the
// same string; the newlines of indentation stay.
func printableJSON(b []byte) []byte { return escapeUnprintable(b, false) }

// escapeUnprintable writes as escapes the characters of b, JSON or YAML
// in double quotes, that a terminal would act on; the two differ only in
// how they spell a character beyond U+FFFF (a UTF-16 pair in JSON, \U
// in YAML).
func escapeUnprintable(b []byte, yaml bool) []byte {
	if isPrintableJSON(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == '\n' || (shownAsIs(r) && !(r == utf8.RuneError && size == 1)):
			out = append(out, b[i:i+size]...)
		case r > 0xffff && yaml:
			out = fmt.Appendf(out, `\U%08x`, r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		default:
			// An invalid byte, which the encoders never write, is
			// written as U+FFFD, as encoding/json would have.
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += size
	}
	return out
}

// isPrintableJSON reports whether printableJSON would return b unchanged.
func isPrintableJSON(b []byte) bool {
	for i, c := range b {
		if (c < 0x20 && c != '\n') || c >= 0x7f {
			return isPrintableUTF8(strings.ReplaceAll(string(b[i:]), "\n", ""))
		}
	}
	return true
}
