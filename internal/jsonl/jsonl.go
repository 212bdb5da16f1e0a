package jsonl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/crew-dev/crew/internal/fsys"
)

// Line is one complete record read from a file.
type Line struct {
	Offset int64  // byte offset of the line's first byte
	Num    int64  // 1-based line number, or 0 when reading started mid-file
	Data   []byte // the line without its '\n'; valid until the next Next call
}

// Reader reads complete lines from an offset onward. A final line without
// '\n' is not returned.
type Reader struct {
	r      *bufio.Reader
	off    int64
	num    int64
	err    error
	buffer []byte
}

// NewReader reads f from byte offset off. num is the line number of the line
// at off (1 at the start of a file; 0 if unknown).
func NewReader(f io.ReaderAt, off int64, num int64) *Reader {
	return NewReaderSize(f, off, num, 64<<10)
}

// NewReaderSize is NewReader with a read buffer of size bytes: a line
// that fits in it is returned where it was read, not copied, and one
// that does not is gathered in a buffer that grows, copying as it grows.
// A reader of a file of long lines (a snapshot's tasks) sizes it to fit.
func NewReaderSize(f io.ReaderAt, off int64, num int64, size int) *Reader {
	return &Reader{r: bufio.NewReaderSize(io.NewSectionReader(f, off, 1<<62), size), off: off, num: num}
}

// Next returns the next complete line, or io.EOF when none is left (an
// unterminated last line counts as none). Other errors are I/O errors.
func (r *Reader) Next() (Line, error) {
	if r.err != nil {
		return Line{}, r.err
	}
	r.buffer = r.buffer[:0]
	var line []byte
	for {
		chunk, err := r.r.ReadSlice('\n')
		if err == nil && len(r.buffer) == 0 {
			line = chunk // whole in the read buffer: not copied
			break
		}
		r.buffer = append(r.buffer, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if err == io.EOF {
				r.err = io.EOF // a torn or in-progress line is not returned
			} else {
				r.err = err
			}
			return Line{}, r.err
		}
		line = r.buffer
		break
	}
	l := Line{Offset: r.off, Num: r.num, Data: line[:len(line)-1]}
	r.off += int64(len(line))
	if r.num > 0 {
		r.num++
	}
	return l, nil
}

// Offset is the byte offset just past the last line returned: where the next
// line starts.
func (r *Reader) Offset() int64 { return r.off }

// Num is the line number of the next line (0 when unknown).
func (r *Reader) Num() int64 { return r.num }

// CompleteSize returns the size of f up to and including its last '\n': the
// bytes that hold complete lines. A torn tail lies between it and the file's
// size.
//
// The file may be shorter than its stat says a moment before: a reader
// takes no lock, and a writer holding the file's lock cuts a torn last
// line off (CutTorn) after a crash; on a FUSE file system the size of a
// write in progress can show before its bytes do. A read that ends early
// is then no error: the file ends where the read did, or, when nothing
// was read, it is measured again from a new stat.
func CompleteSize(f *os.File) (complete, size int64, err error) {
	return completeSize(f)
}

// statReaderAt is what completeSize reads: an *os.File.
type statReaderAt interface {
	io.ReaderAt
	Stat() (fs.FileInfo, error)
}

// shrinkRetries is how many times completeSize measures a file that was
// shorter than its stat said, waiting a little longer each time (45 ms in
// all): more means something keeps truncating it.
const shrinkRetries = 10

func completeSize(f statReaderAt) (complete, size int64, err error) {
	for try := range shrinkRetries {
		if try > 0 {
			time.Sleep(time.Duration(try) * time.Millisecond)
		}
		complete, size, err = completeSizeOnce(f)
		if !errors.Is(err, io.EOF) {
			return complete, size, err
		}
	}
	return 0, 0, fmt.Errorf("measure %s: it kept being shorter than its size while it was read: %w", fileName(f), err)
}

// fileName names f in errors.
func fileName(f any) string {
	if n, ok := f.(interface{ Name() string }); ok {
		return n.Name()
	}
	return "file"
}

// completeSizeOnce is completeSize from one stat: io.EOF when the file is
// shorter than that stat said, by more than its last block.
func completeSizeOnce(f statReaderAt) (complete, size int64, err error) {
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	size = st.Size()
	end := size
	buf := make([]byte, 4096)
	for end > 0 {
		n := int64(len(buf))
		if end < n {
			n = end
		}
		got, err := f.ReadAt(buf[:n], end-n)
		if err == io.EOF && end == size && got > 0 {
			// The file ends where this read did.
			n, end, size, err = int64(got), end-n+int64(got), end-n+int64(got), nil
		}
		if err != nil {
			return 0, 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return end - n + int64(i) + 1, size, nil
		}
		end -= n
	}
	return 0, size, nil
}

// CutTorn truncates a torn last line off f, so the next append starts on a
// fresh line. It must be called with the file's lock held: an unlocked
// writer's line in progress looks just like a torn one. It returns the new
// size and the number of bytes cut.
func CutTorn(f *os.File) (size, cut int64, err error) {
	complete, size, err := CompleteSize(f)
	if err != nil {
		return 0, 0, err
	}
	if complete == size {
		return size, 0, nil
	}
	if err := fsys.TruncateFile(f, complete); err != nil {
		return 0, 0, fmt.Errorf("cut torn line off %s: %w", f.Name(), err)
	}
	return complete, size - complete, nil
}

// LastLine returns the last complete line of f (before any torn tail), or
// ok=false when f has none. It reads backwards, so its cost does not depend
// on the file's length.
func LastLine(f *os.File) (line Line, ok bool, err error) {
	complete, _, err := CompleteSize(f)
	if err != nil || complete == 0 {
		return Line{}, false, err
	}
	start, err := lineStart(f, complete-1)
	if err != nil {
		return Line{}, false, err
	}
	data := make([]byte, complete-1-start)
	if _, err := f.ReadAt(data, start); err != nil {
		return Line{}, false, err
	}
	return Line{Offset: start, Data: data}, true, nil
}

// lineStart returns the offset of the first byte of the line holding byte
// pos: the byte after the previous '\n', or 0.
func lineStart(f io.ReaderAt, pos int64) (int64, error) {
	buf := make([]byte, 4096)
	end := pos
	for end > 0 {
		n := int64(len(buf))
		if end < n {
			n = end
		}
		if _, err := f.ReadAt(buf[:n], end-n); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return end - n + int64(i) + 1, nil
		}
		end -= n
	}
	return 0, nil
}

// SeqOf decodes only the "seq" field of a record. ok is false when the line
// is not a JSON object with a positive integer seq.
func SeqOf(data []byte) (seq int64, ok bool) {
	var v struct {
		Seq int64 `json:"seq"`
	}
	if json.Unmarshal(data, &v) != nil || v.Seq <= 0 {
		return 0, false
	}
	return v.Seq, true
}

// SeekSeq returns the offset of the first complete line in f[:size] whose
// seq is greater than since, assuming lines are in seq order; 0 when since
// is 0 or less. Lines whose seq cannot be read are stepped over. When no
// such line exists it returns the end of the last complete line in
// f[:size]: never a position inside an unterminated last line, which the
// next writer cuts off and replaces with its own (a cursor placed inside it
// would read the middle of that new line). It binary-searches byte
// offsets, reading O(log size) lines.
func SeekSeq(f io.ReaderAt, size int64, since int64) (int64, error) {
	if since <= 0 {
		return 0, nil
	}
	end, err := lineStart(f, size) // end of the complete lines
	if err != nil {
		return 0, err
	}
	// Invariant: the answer is the first line in [lo, hi) with a readable
	// seq greater than since, else ceil; no line in [hi, ceil) has a
	// readable seq; lo and hi are line starts (or end).
	lo, hi, ceil := int64(0), end, end
	for lo < hi {
		mid := lo + (hi-lo)/2
		start, err := lineStart(f, mid)
		if err != nil {
			return 0, err
		}
		// Find the first line in [start, hi) with a readable seq.
		r := NewReaderSize(f, start, 0, probeBuffer)
		var (
			seq  int64
			at   int64 = -1
			next int64
		)
		for {
			l, err := r.Next()
			if errors.Is(err, io.EOF) || (err == nil && l.Offset >= hi) {
				break
			}
			if err != nil {
				return 0, err
			}
			if s, ok := SeqOf(l.Data); ok {
				seq, at, next = s, l.Offset, r.Offset()
				break
			}
		}
		switch {
		case at < 0: // nothing readable in [start, hi)
			hi = start
		case seq <= since:
			lo = next
		default:
			hi, ceil = at, at
		}
	}
	return ceil, nil
}

// probeBuffer is the read buffer of SeekSeq's probes: each probe reads one
// line or a few, so a small buffer keeps a seek's reads near O(log size)
// lines rather than O(log size) × 64 KiB. Longer lines still read whole.
const probeBuffer = 4 << 10

// LineBefore returns the complete line that ends just before byte offset
// off (off is the offset after its '\n'), or ok=false when off is 0 or the
// byte before off is not a '\n'.
func LineBefore(f io.ReaderAt, off int64) (line Line, ok bool, err error) {
	if off <= 0 {
		return Line{}, false, nil
	}
	var b [1]byte
	if _, err := f.ReadAt(b[:], off-1); err != nil {
		if err == io.EOF {
			return Line{}, false, nil
		}
		return Line{}, false, err
	}
	if b[0] != '\n' {
		return Line{}, false, nil
	}
	start, err := lineStart(f, off-1)
	if err != nil {
		return Line{}, false, err
	}
	data := make([]byte, off-1-start)
	if _, err := f.ReadAt(data, start); err != nil {
		return Line{}, false, err
	}
	return Line{Offset: start, Data: data}, true, nil
}

// Open opens the file at path for reading and returns a Reader positioned
// at the first line whose seq is greater than since (SeekSeq), with line
// numbers when that is the file's start. Errors are os.Open's (a missing
// file is os.ErrNotExist) or I/O errors; the caller closes the file.
func Open(path string, since int64) (*os.File, *Reader, error) {
	f, err := fsys.OpenNoFollow(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, nil, err
	}
	off, err := seekStart(f, since)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	var num int64
	if off == 0 {
		num = 1
	}
	return f, NewReader(f, off, num), nil
}

// seekStart returns where a reader of the lines after seq since starts
// in f: SeekSeq over f's complete lines as completeSize measures them,
// so that a file a writer shortened since its stat (cutting a torn last
// line) is not read past its end.
func seekStart(f statReaderAt, since int64) (int64, error) {
	if since <= 0 {
		return 0, nil
	}
	complete, _, err := completeSize(f)
	if err != nil {
		return 0, err
	}
	return SeekSeq(f, complete, since)
}
