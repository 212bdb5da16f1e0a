package tail

import (
	"os"
	"path/filepath"
	"testing"
)

func TestBuffer(t *testing.T) {
	b := &Buffer{Max: 8}
	for _, s := range []string{"abc", "defgh", "ij", "", "k"} {
		b.Write([]byte(s))
	}
	if got := b.String(); got != "defghijk" {
		t.Fatalf("tail = %q", got)
	}
	b.Write([]byte("0123456789"))
	if got := b.String(); got != "23456789" {
		t.Fatalf("tail after a long write = %q", got)
	}
	u := &Buffer{Max: 5}
	u.Write([]byte("aé日x")) // a, é (2 bytes), 日 (3 bytes), x: the tail starts mid-日
	if got := u.String(); got != "x" && got != "日x" {
		t.Fatalf("tail cut inside a character: %q", got)
	}
}

// File reads after from, the last max bytes at most, from a whole
// character on; a missing file has no tail.
func TestFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t1.log")
	if got := File(path, 0, 8); got != "" {
		t.Fatalf("tail of a missing file = %q", got)
	}
	if err := os.WriteFile(path, []byte("attempt 1\nattempt 2: é!"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := File(path, 10, 100); got != "attempt 2: é!" {
		t.Fatalf("tail after offset 10 = %q", got)
	}
	if got := File(path, 0, 2); got != "!" { // the last 2 bytes start inside é
		t.Fatalf("last 2 bytes = %q", got)
	}
}
