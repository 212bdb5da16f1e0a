package human

import "testing"

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, text, line string }{
		{"plain", "plain", "plain"},
		{"a\nb\tc", "a\nb\tc", `a\nb\tc`},
		{"\x1b[31mred", `\x1b[31mred`, `\x1b[31mred`},
		{"rtl \u202e evil", `rtl \u202e evil`, `rtl \u202e evil`},
		{"iso \u2066x\u2069 lrm \u200e", `iso \u2066x\u2069 lrm \u200e`, `iso \u2066x\u2069 lrm \u200e`},
		{"c1 \u009b ls \u2028", `c1 \u009b ls \u2028`, `c1 \u009b ls \u2028`},
		{"bad \x9b byte", "bad \ufffd byte", "bad \ufffd byte"},
		{"del \x7f", `del \x7f`, `del \x7f`},
		{"ünïcode ✓", "ünïcode ✓", "ünïcode ✓"},
	} {
		if got := Escape(c.in); got != c.text {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.text)
		}
		if got := Line(c.in); got != c.line {
			t.Errorf("Line(%q) = %q, want %q", c.in, got, c.line)
		}
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0 runs", 1: "1 run", 2: "2 runs", 12: "12 runs"} {
		if got := Count(n, "run"); got != want {
			t.Errorf("Count(%d, run) = %q, want %q", n, got, want)
		}
	}
}
