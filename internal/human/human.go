// Package human is how crew writes text for people (the terminal output
// of cmd/crew, and the markdown and JUnit reports of package report): one
// escaping rule for text that came from a message, a title or a reason,
// and counted nouns.
//
// The rule (docs/cli.md, JSON output): control characters other than
// newline and tab, C1 controls, the line and paragraph separators (U+2028,
// U+2029) and the bidirectional controls (Unicode's Bidi_Control: U+061C,
// U+200E, U+200F, U+202A–U+202E, U+2066–U+2069) are written as Go escapes
// (\x1b, \u202e), so that text cannot move the cursor, recolour or retitle
// a terminal, nor reorder what a reader sees (the "Trojan Source" attack,
// CVE-2021-42574). Machine output (--json, the report's json format) is
// exact and never escaped.
package human

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape returns s with the characters of the rule (package comment)
// written as Go escapes; newlines and tabs are kept.
func Escape(s string) string { return escape(s, false) }

// Line is Escape for text shown on one line (a title in a table, a
// subject): newlines and tabs are escaped too (\n, \t), so the text
// cannot break the line or the columns it stands in.
func Line(s string) string { return escape(s, true) }

func escape(s string, line bool) string {
	if !needsEscape(s, line) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unsafe(r, line) {
			q := fmt.Sprintf("%+q", string(r))
			b.WriteString(q[1 : len(q)-1])
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// needsEscape reports whether s has a character to escape, or a byte
// that is not UTF-8 (written as U+FFFD: a stray 0x9b is a C1 control to
// an 8-bit terminal).
func needsEscape(s string, line bool) bool {
	if !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if unsafe(r, line) {
			return true
		}
	}
	return false
}

// unsafe reports whether r is escaped by the rule; with line, newline
// and tab are too. (An invalid byte comes as U+FFFD, which is kept.)
func unsafe(r rune, line bool) bool {
	switch {
	case r == '\n' || r == '\t':
		return line
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
		return true
	case r == 0x2028 || r == 0x2029:
		return true
	}
	return unicode.In(r, unicode.Bidi_Control)
}

// Count returns n and noun, in the plural unless n is 1: "1 run",
// "3 runs", "0 runs". noun's plural is noun+"s" (every noun crew counts:
// runs, tasks, events, messages, places, files, seqs).
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
