//go:build unix

package file

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRescanReadsInChunks: the rescan reads the log's new bytes a chunk
// at a time and still finds a line naming its participant wherever it
// falls (a name cut in two by a chunk's end, a line longer than a chunk,
// after many chunks of others' lines), never in an unfinished line
// (found once it is finished), and wakes once per line.
func TestRescanReadsInChunks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(path, []byte(`{"seq":1,"task":"t1"}`+"\n"), 0o600))
	w := &fifoWaiter{log: path, off: int64(len(`{"seq":1,"task":"t1"}` + "\n")), needle: [][]byte{[]byte(`"t7"`)}}
	add := func(s string) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		must(err)
		_, err = f.WriteString(s)
		must(err)
		must(f.Close())
	}
	other := func(n int) string { // others' lines, n bytes in all
		var b strings.Builder
		for b.Len() < n {
			b.WriteString(`{"task":"t8","body":"` + strings.Repeat("x", 200) + "\"}\n")
		}
		return b.String()
	}
	if w.grown() {
		t.Fatal("a log that did not grow woke its owner")
	}
	add(other(5 * wakeChunk))
	if w.grown() {
		t.Fatal("five chunks of others' lines woke t7's waiter")
	}
	// The name at every place around the first chunks' ends (a chunk
	// carries the last bytes of the one before it: its end moves).
	for _, around := range []int{wakeChunk, 2 * wakeChunk} {
		for at := around - 16; at <= around+8; at++ {
			for _, name := range []string{`"t7"`, `"t9"`} {
				p := filepath.Join(t.TempDir(), "cut.jsonl")
				must(os.WriteFile(p, []byte(`{"a":"`+strings.Repeat("x", at-6)+`",`+name+":1}\n"), 0o600))
				cw := &fifoWaiter{log: p, needle: w.needle}
				if got := cw.grown(); got != (name == `"t7"`) {
					t.Fatalf("%s at byte %d of a line: woke %v", name, at+2, got)
				}
			}
		}
	}
	add(`{"task":"t7","body":"` + strings.Repeat("z", 3*wakeChunk)) // unfinished
	if w.grown() {
		t.Fatal("an unfinished line woke its owner")
	}
	add("\"}\n")
	if !w.grown() {
		t.Fatal("a line longer than a chunk, once finished, was not found")
	}
	if st, _ := os.Stat(path); w.off != st.Size() {
		t.Errorf("the rescan stopped at %d of %d bytes", w.off, st.Size())
	}
}
