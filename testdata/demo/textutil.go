// Package textutil is the small real Go module that `make demo` hands to a
// crew of workers: one vets it, one tests it, one writes NOTES.md about it.
//
// Reverse has a deliberate bug (it reverses bytes, not runes), so
// TestReverseUnicode fails and the test worker has to ask its leader
// whether to fix it or skip it.
package textutil

import "strings"

// Reverse returns s with its characters in reverse order.
//
// Bug (deliberate, for the demo): it reverses bytes, so a multi-byte UTF-8
// character such as "é" comes out broken.
func Reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// WordCount returns the number of words in s, a word being a run of
// characters between white space.
func WordCount(s string) int {
	return len(strings.Fields(s))
}

// Initials returns the first letter of each word of s, upper-cased.
func Initials(s string) string {
	var b strings.Builder
	for _, w := range strings.Fields(s) {
		r := []rune(w)
		b.WriteString(strings.ToUpper(string(r[0])))
	}
	return b.String()
}
