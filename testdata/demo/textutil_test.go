package textutil

import "testing"

func TestReverseASCII(t *testing.T) {
	if got := Reverse("crew"); got != "werc" {
		t.Errorf("Reverse(%q) = %q, want %q", "crew", got, "werc")
	}
}

// TestReverseUnicode fails on purpose: Reverse reverses bytes, not runes.
// The demo's test worker finds this failure and asks its leader what to do.
func TestReverseUnicode(t *testing.T) {
	if got := Reverse("café"); got != "éfac" {
		t.Errorf("Reverse(%q) = %q, want %q", "café", got, "éfac")
	}
}

func TestWordCount(t *testing.T) {
	if got := WordCount("  a leader and\tthree workers\n"); got != 5 {
		t.Errorf("WordCount = %d, want 5", got)
	}
}

func TestInitials(t *testing.T) {
	if got := Initials("durable json lines"); got != "DJL" {
		t.Errorf("Initials = %q, want %q", got, "DJL")
	}
}
