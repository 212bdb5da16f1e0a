package jsonl

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFile writes data to a new file in a test directory and opens it for
// reading and writing.
func writeFile(t *testing.T, data []byte) *os.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f.jsonl")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// readAll returns every line a Reader from offset 0 gives, copied.
func readAll(t *testing.T, f io.ReaderAt) []Line {
	t.Helper()
	r := NewReader(f, 0, 1)
	var out []Line
	for {
		l, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		l.Data = bytes.Clone(l.Data)
		out = append(out, l)
	}
}

// seqLine is a record with a seq and a body of n filler bytes.
func seqLine(seq int64, n int) string {
	return fmt.Sprintf(`{"seq":%d,"body":"%s"}`, seq, strings.Repeat("x", n))
}

func TestReaderLongLines(t *testing.T) {
	// Lengths around bufio's 64 KiB buffer and far beyond it (docs/guarantees.md, guarantee 7:
	// a 900 KiB line reads back whole).
	lens := []int{0, 1, 64<<10 - 1, 64 << 10, 64<<10 + 1, 128<<10 + 7, 900 << 10, 3}
	rng := rand.New(rand.NewPCG(1, 2))
	var want [][]byte
	var file []byte
	for _, n := range lens {
		line := make([]byte, n)
		for i := range line {
			line[i] = byte(rng.IntN(255)) // any byte but '\n'...
			if line[i] == '\n' {
				line[i] = 0xff
			}
		}
		want = append(want, line)
		file = append(append(file, line...), '\n')
	}
	f := writeFile(t, file)
	got := readAll(t, f)
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d", len(got), len(want))
	}
	var off int64
	for i, l := range got {
		if !bytes.Equal(l.Data, want[i]) {
			t.Errorf("line %d (%d bytes) differs: got %d bytes", i+1, len(want[i]), len(l.Data))
		}
		if l.Offset != off || l.Num != int64(i+1) {
			t.Errorf("line %d: offset %d num %d, want offset %d num %d", i+1, l.Offset, l.Num, off, i+1)
		}
		off += int64(len(want[i])) + 1
	}
}

func TestReaderSkipsUnterminatedLastLine(t *testing.T) {
	for _, torn := range []string{"{", `{"seq":3}`, strings.Repeat("y", 200<<10)} {
		f := writeFile(t, []byte("{\"seq\":1}\n{\"seq\":2}\n"+torn))
		r := NewReader(f, 0, 1)
		var n int
		for {
			l, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(l.Data, []byte("y")) || string(l.Data) == torn {
				t.Fatalf("torn line returned: %.40q", l.Data)
			}
			n++
		}
		if n != 2 {
			t.Fatalf("got %d lines, want 2", n)
		}
		if r.Offset() != 20 {
			t.Fatalf("Offset = %d, want 20 (start of the torn line)", r.Offset())
		}
		// EOF stays EOF.
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("second Next after EOF = %v", err)
		}
	}
}

func TestReaderFromOffset(t *testing.T) {
	f := writeFile(t, []byte("a\nbb\nccc\n"))
	r := NewReader(f, 2, 0)
	l, err := r.Next()
	if err != nil || string(l.Data) != "bb" || l.Offset != 2 || l.Num != 0 {
		t.Fatalf("Next = %+v %q, %v", l, l.Data, err)
	}
	r = NewReader(f, 5, 3)
	l, err = r.Next()
	if err != nil || string(l.Data) != "ccc" || l.Num != 3 || r.Offset() != 9 || r.Num() != 4 {
		t.Fatalf("Next = %+v %q, %v; offset %d, next num %d", l, l.Data, err, r.Offset(), r.Num())
	}
}

// errReaderAt fails every read.
type errReaderAt struct{}

func (errReaderAt) ReadAt([]byte, int64) (int, error) { return 0, errors.New("disk on fire") }

func TestReaderIOError(t *testing.T) {
	r := NewReader(errReaderAt{}, 0, 1)
	if _, err := r.Next(); err == nil || err == io.EOF {
		t.Fatalf("Next on a failing file = %v, want the I/O error", err)
	}
	if _, err := SeekSeq(errReaderAt{}, 100, 5); err == nil {
		t.Fatal("SeekSeq on a failing file: no error")
	}
}

func TestCompleteSizeAndCutTorn(t *testing.T) {
	big := strings.Repeat("z", 10000) // a torn tail longer than the 4 KiB backward-read block
	cases := []struct {
		data           string
		complete, size int64
	}{
		{"", 0, 0},
		{"\n", 1, 1},
		{"a\n", 2, 2},
		{"a\nb", 2, 3},
		{"abc", 0, 3},
		{big, 0, 10000},
		{"a\n" + big, 2, 10002},
		{big + "\n" + big, 10001, 20001},
	}
	for _, c := range cases {
		f := writeFile(t, []byte(c.data))
		complete, size, err := CompleteSize(f)
		if err != nil || complete != c.complete || size != c.size {
			t.Errorf("CompleteSize(%.20q) = %d, %d, %v; want %d, %d", c.data, complete, size, err, c.complete, c.size)
		}
		newSize, cut, err := CutTorn(f)
		if err != nil || newSize != c.complete || cut != c.size-c.complete {
			t.Errorf("CutTorn(%.20q) = %d, %d, %v; want %d, %d", c.data, newSize, cut, err, c.complete, c.size-c.complete)
		}
		st, _ := f.Stat()
		if st.Size() != c.complete {
			t.Errorf("after CutTorn(%.20q) the file has %d bytes, want %d", c.data, st.Size(), c.complete)
		}
		data, _ := os.ReadFile(f.Name())
		if string(data) != c.data[:c.complete] {
			t.Errorf("CutTorn(%.20q) changed the complete lines", c.data)
		}
	}
}

func TestLastLine(t *testing.T) {
	long := strings.Repeat("q", 9000)
	cases := []struct {
		data string
		ok   bool
		want string
		off  int64
	}{
		{"", false, "", 0},
		{"torn only", false, "", 0},
		{strings.Repeat("t", 9000), false, "", 0},
		{"\n", true, "", 0},
		{"a\n", true, "a", 0},
		{"a\nbc\n", true, "bc", 2},
		{"a\nbc\ntorn", true, "bc", 2},
		{"a\n" + long + "\n", true, long, 2},
		{long + "\n" + long + "\n" + long, true, long, 9001},
		{"a\n\n", true, "", 2},
	}
	for _, c := range cases {
		f := writeFile(t, []byte(c.data))
		l, ok, err := LastLine(f)
		if err != nil || ok != c.ok || string(l.Data) != c.want || l.Offset != c.off {
			t.Errorf("LastLine(%.20q) = %.20q at %d, %v, %v; want %.20q at %d, %v", c.data, l.Data, l.Offset, ok, err, c.want, c.off, c.ok)
		}
	}
}

func TestLineBefore(t *testing.T) {
	long := strings.Repeat("L", 5000)
	data := "a\n" + long + "\nccc\ntorn"
	f := writeFile(t, []byte(data))
	cases := []struct {
		off  int64
		ok   bool
		want string
		at   int64
	}{
		{0, false, "", 0},
		{-1, false, "", 0},
		{1, false, "", 0}, // mid-line
		{2, true, "a", 0},
		{3, false, "", 0},
		{5003, true, long, 2},
		{5007, true, "ccc", 5003},
		{int64(len(data)), false, "", 0},      // after a torn line
		{int64(len(data)) + 10, false, "", 0}, // beyond the end
	}
	for _, c := range cases {
		l, ok, err := LineBefore(f, c.off)
		if err != nil || ok != c.ok || string(l.Data) != c.want || l.Offset != c.at {
			t.Errorf("LineBefore(%d) = %.10q at %d, %v, %v; want %.10q at %d, %v", c.off, l.Data, l.Offset, ok, err, c.want, c.at, c.ok)
		}
	}
}

func TestSeqOf(t *testing.T) {
	cases := []struct {
		data string
		seq  int64
		ok   bool
	}{
		{`{"seq":7}`, 7, true},
		{`{"type":"x","seq":12,"body":"{\"seq\":99}"}`, 12, true},
		{`{"seq":0}`, 0, false},
		{`{"seq":-3}`, 0, false},
		{`{"seq":"7"}`, 0, false},
		{`{"seq":1.5}`, 0, false},
		{`{}`, 0, false},
		{`[1]`, 0, false},
		{`{"seq":7`, 0, false},
		{``, 0, false},
		{`garbage`, 0, false},
	}
	for _, c := range cases {
		seq, ok := SeqOf([]byte(c.data))
		if seq != c.seq || ok != c.ok {
			t.Errorf("SeqOf(%s) = %d, %v; want %d, %v", c.data, seq, ok, c.seq, c.ok)
		}
	}
}

// linearSeek is SeekSeq's contract computed the slow way: 0 for since <= 0;
// else the offset of the first complete line of data whose seq can be read
// and is greater than since; else the end of the last complete line (never
// a position inside an unterminated last line).
func linearSeek(data []byte, since int64) int64 {
	return scanLines(data).seek(since)
}

// scannedLines are the complete lines of a file with their seqs (0 when
// unreadable), for linear seeks.
type scannedLines struct {
	offs, seqs []int64
	end        int64
}

func scanLines(data []byte) scannedLines {
	var s scannedLines
	for {
		i := bytes.IndexByte(data[s.end:], '\n')
		if i < 0 {
			return s
		}
		seq, _ := SeqOf(data[s.end : s.end+int64(i)])
		s.offs, s.seqs = append(s.offs, s.end), append(s.seqs, seq)
		s.end += int64(i) + 1
	}
}

func (s scannedLines) seek(since int64) int64 {
	if since <= 0 {
		return 0
	}
	for i, seq := range s.seqs {
		if seq > since {
			return s.offs[i]
		}
	}
	return s.end
}

// countingReaderAt counts the reads and bytes read through it.
type countingReaderAt struct {
	r            io.ReaderAt
	reads, bytes int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.reads++
	c.bytes += int64(n)
	return n, err
}

func TestSeekSeqTable(t *testing.T) {
	l := func(seq int64) string { return seqLine(seq, 3) + "\n" }
	dense := l(1) + l(2) + l(3) + l(4) + l(5)
	sparse := l(2) + l(7) + l(8) + l(20) + l(31)
	cases := []struct {
		name string
		data string
	}{
		{"empty", ""},
		{"one", l(1)},
		{"dense", dense},
		{"sparse", sparse},
		{"damaged middle", l(1) + l(2) + "garbage\n" + l(4) + l(5)},
		{"damaged first", "garbage\n" + l(2) + l(3)},
		{"damaged last", l(1) + l(2) + "{\"seq\":\n"},
		{"torn tail", dense + `{"seq":6,"bo`},
		{"long torn tail", dense + strings.Repeat("t", 100<<10)},
		{"only torn", `{"seq":1`},
		{"empty lines", l(1) + "\n\n" + l(3)},
		{"huge lines", seqLine(1, 300<<10) + "\n" + l(2) + seqLine(3, 200<<10) + "\n" + l(4)},
	}
	for _, c := range cases {
		f := writeFile(t, []byte(c.data))
		for since := int64(-1); since <= 40; since++ {
			got, err := SeekSeq(f, int64(len(c.data)), since)
			want := linearSeek([]byte(c.data), since)
			if err != nil || got != want {
				t.Errorf("%s: SeekSeq(since %d) = %d, %v; want %d", c.name, since, got, err, want)
			}
		}
	}
}

// TestSeekSeqTornTail is a regression test: with an unterminated last line
// and nothing after since, SeekSeq returned the file size, a position
// inside the torn line. A cursor placed there, after the next writer cut
// the torn line and appended its own, read from the middle of the new line
// (or missed it when it was shorter than the torn one).
func TestSeekSeqTornTail(t *testing.T) {
	data := seqLine(1, 5) + "\n" + seqLine(2, 5) + "\n" + seqLine(3, 500)
	f := writeFile(t, []byte(data))
	complete := int64(strings.LastIndexByte(data, '\n') + 1)
	for _, since := range []int64{2, 3, 100} {
		got, err := SeekSeq(f, int64(len(data)), since)
		if err != nil || got != complete {
			t.Errorf("SeekSeq(since %d) = %d, %v; want %d, the start of the torn line", since, got, err, complete)
		}
	}
}

// randomFile builds a file of seq-ordered lines: dense or sparse seqs,
// some damaged lines (unreadable, or holding no seq), some long lines, and
// maybe an unterminated last line. It returns the data and the largest seq.
func randomFile(rng *rand.Rand) ([]byte, int64) {
	var b []byte
	n := rng.IntN(60)
	sparse := rng.IntN(2) == 0
	var seq int64
	for i := 0; i < n; i++ {
		if sparse {
			seq += 1 + rng.Int64N(5)
		} else {
			seq++
		}
		body := rng.IntN(40)
		switch r := rng.IntN(20); {
		case r == 0:
			body = 4000 + rng.IntN(8000) // longer than a read block
		case r == 4 && rng.IntN(4) == 0:
			body = 64<<10 + rng.IntN(1000) // longer than a reader's buffer
		case r == 1:
			b = append(b, "not json at all\n"...) // damage before this line
		case r == 2:
			b = append(b, `{"type":"no seq"}`+"\n"...)
		case r == 3:
			b = append(b, '\n')
		}
		if rng.IntN(25) == 0 {
			// A damaged line in place of the record: its seq is lost.
			b = append(b, fmt.Sprintf(`{"seq":%d,"bo`, seq)...)
			b = append(b, '\n')
			continue
		}
		b = append(b, seqLine(seq, body)...)
		b = append(b, '\n')
	}
	switch rng.IntN(4) {
	case 0:
		b = append(b, fmt.Sprintf(`{"seq":%d,"body":"tor`, seq+1)...)
	case 1:
		b = append(b, strings.Repeat("T", rng.IntN(9000))...)
	}
	return b, seq
}

// TestSeekSeqMatchesLinearScan compares SeekSeq with a linear scan on many
// random files, for the edge sinces and a sample of the others, on the
// whole file and on a prefix of it (a size that may end mid-line).
func TestSeekSeqMatchesLinearScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	dir := t.TempDir()
	for i := 0; i < 200; i++ {
		data, last := randomFile(rng)
		path := filepath.Join(dir, fmt.Sprintf("%d.jsonl", i))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sizes := []int64{int64(len(data))}
		if len(data) > 0 {
			sizes = append(sizes, rng.Int64N(int64(len(data))))
		}
		for _, size := range sizes {
			lines := scanLines(data[:size])
			sinces := []int64{0, 1, last - 1, last, last + 1}
			for range 12 {
				sinces = append(sinces, rng.Int64N(last+3))
			}
			for _, since := range sinces {
				got, err := SeekSeq(f, size, since)
				want := lines.seek(since)
				if err != nil || got != want {
					f.Close()
					t.Fatalf("file %d (%d bytes, size %d): SeekSeq(since %d) = %d, %v; linear scan says %d", i, len(data), size, since, got, err, want)
				}
			}
		}
		f.Close()
	}
}

// TestSeekSeqReadsLittle checks that a seek costs O(log n) line reads, not
// a scan: on a file of 100,000 lines it reads a small fraction of the file.
func TestSeekSeqReadsLittle(t *testing.T) {
	var b bytes.Buffer
	const n = 100000
	for seq := int64(1); seq <= n; seq++ {
		b.WriteString(seqLine(seq, 40))
		b.WriteByte('\n')
	}
	f := writeFile(t, b.Bytes())
	for _, since := range []int64{1, n / 2, n - 10, n} {
		c := &countingReaderAt{r: f}
		got, err := SeekSeq(c, int64(b.Len()), since)
		if err != nil || got != linearSeek(b.Bytes(), since) {
			t.Fatalf("SeekSeq(since %d) = %d, %v", since, got, err)
		}
		if c.reads > 200 || c.bytes > int64(b.Len())/20 {
			t.Errorf("SeekSeq(since %d) made %d reads of %d bytes in a %d-byte file: not a binary search", since, c.reads, c.bytes, b.Len())
		}
	}
}

// statAs is a file whose first Stat says what an earlier stat said.
type statAs struct {
	*os.File
	fi *os.FileInfo
}

func (f statAs) Stat() (os.FileInfo, error) {
	if fi := *f.fi; fi != nil {
		*f.fi = nil
		return fi, nil
	}
	return f.File.Stat()
}

// TestSeekStartAfterCut: a reader that stats a file just before a writer
// cuts its torn last line off (CutTorn, under the run lock the reader
// does not take) still finds where its lines start, instead of failing
// with io.EOF from reading past the new end ("crew: EOF" from crew
// outbox in a power-loss run).
func TestSeekStartAfterCut(t *testing.T) {
	var data []byte
	for seq := 1; seq <= 200; seq++ {
		data = fmt.Appendf(data, "{\"seq\":%d,\"body\":%q}\n", seq, strings.Repeat("b", 40))
	}
	want := int64(bytes.Index(data, []byte(`{"seq":151,`)))
	f := writeFile(t, append(data, []byte(`{"seq":201,"body":"`+strings.Repeat("t", 6000))...))
	before, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := CutTorn(f); err != nil {
		t.Fatal(err)
	}
	got, err := seekStart(statAs{f, &before}, 150)
	if err != nil || got != want {
		t.Fatalf("seekStart after the torn line was cut = %d, %v; want %d", got, err, want)
	}
}
