package jsonl

import (
	"bytes"
	"io"
	"testing"
)

// FuzzReader feeds arbitrary bytes to the line reader and the seq search.
// The Reader never returns a line holding '\n', the lines it returns, each
// with '\n' added, are exactly the input up to its last '\n' (nothing lost,
// nothing invented, no unterminated line), LineBefore agrees with it, and
// SeekSeq neither panics nor fails and returns a line start within the
// complete lines for any since, and the same offset as a linear scan when
// the readable seqs ascend (the files SeekSeq is meant for).
// Seeds are in testdata/fuzz/FuzzReader. Run with
// go test -fuzz FuzzReader ./internal/jsonl/.
func FuzzReader(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, since int64) {
		complete := int64(bytes.LastIndexByte(data, '\n') + 1)
		src := bytes.NewReader(data)
		r := NewReader(src, 0, 1)
		var got []byte
		var num int64 = 1
		for {
			l, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			if bytes.IndexByte(l.Data, '\n') >= 0 {
				t.Fatalf("line %d holds a newline: %q", l.Num, l.Data)
			}
			if l.Offset != int64(len(got)) || l.Num != num {
				t.Fatalf("line at offset %d num %d, want offset %d num %d", l.Offset, l.Num, len(got), num)
			}
			got = append(append(got, l.Data...), '\n')
			if r.Offset() != int64(len(got)) {
				t.Fatalf("Offset() = %d after %d bytes of lines", r.Offset(), len(got))
			}
			before, ok, err := LineBefore(src, r.Offset())
			if err != nil || !ok || before.Offset != l.Offset || !bytes.Equal(before.Data, l.Data) {
				t.Fatalf("LineBefore(%d) = %q at %d, %v, %v; want %q at %d", r.Offset(), before.Data, before.Offset, ok, err, l.Data, l.Offset)
			}
			num++
		}
		if !bytes.Equal(got, data[:complete]) {
			t.Fatalf("lines read %q are not the input's complete lines %q", got, data[:complete])
		}
		if _, ok, _ := LineBefore(src, int64(len(data))); ok != (complete == int64(len(data)) && complete > 0) {
			t.Fatalf("LineBefore(end) ok=%v with %d complete bytes of %d", ok, complete, len(data))
		}
		lines := scanLines(data)
		ascending := true
		var prev int64
		for _, seq := range lines.seqs {
			if seq != 0 {
				ascending = ascending && seq > prev
				prev = seq
			}
		}
		for _, s := range []int64{since, since + 1, since - 1, 0, 1, 1 << 62} {
			off, err := SeekSeq(src, int64(len(data)), s)
			if err != nil {
				t.Fatalf("SeekSeq(since %d): %v", s, err)
			}
			if off < 0 || off > complete || (off > 0 && data[off-1] != '\n') {
				t.Fatalf("SeekSeq(since %d) = %d: not a line start within the %d complete bytes", s, off, complete)
			}
			if want := lines.seek(s); ascending && off != want {
				t.Fatalf("SeekSeq(since %d) = %d; a linear scan of these ascending seqs says %d", s, off, want)
			}
		}
	})
}
