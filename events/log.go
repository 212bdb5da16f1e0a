package events

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/internal/fsys"
	"github.com/crew-dev/crew/internal/jsonl"
)

// DamageError reports a line of a log that cannot be used: not JSON, not an
// event, or a seq out of order. It wraps crew.ErrDamaged.
type DamageError struct {
	File   string // path of the file
	Line   int64  // 1-based line number, 0 when unknown (reading began mid-file)
	Offset int64  // byte offset of the line
	Len    int64  // length of the line in bytes, with its '\n'
	Seq    int64  // the seq expected at this point
	Reason string
}

func (e *DamageError) Error() string {
	where := fmt.Sprintf("byte %d", e.Offset)
	if e.Line > 0 {
		where = fmt.Sprintf("line %d", e.Line)
	}
	if e.Seq == 0 { // read from the end (Last): no seq was expected
		return fmt.Sprintf("%s:%s: %s", e.File, where, e.Reason)
	}
	return fmt.Sprintf("%s:%s: %s (expected seq %d)", e.File, where, e.Reason, e.Seq)
}

// Unwrap returns crew.ErrDamaged.
func (e *DamageError) Unwrap() error { return crew.ErrDamaged }

// Cursor reads the events of a log with seq greater than a starting seq, in
// order. It holds the file open; Close it.
type Cursor struct {
	path string
	f    *os.File
	r    *jsonl.Reader
	want int64 // next expected seq
	from int64 // the seq the cursor started after
}

// Read opens the log at path and positions a cursor after seq since (0 for
// the whole log), by binary search, so its cost depends on what is read,
// not on the log's length. A missing file is crew.ErrNotFound.
func Read(path string, since int64) (*Cursor, error) {
	f, r, err := jsonl.Open(path, since)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no event log %s: %w", path, crew.ErrNotFound)
		}
		return nil, err
	}
	return &Cursor{path: path, f: f, r: r, want: since + 1, from: since}, nil
}

// ReadAt opens the log at path with a cursor at byte offset off, where the
// event with seq next is expected (a position saved from Cursor.Offset).
func ReadAt(path string, off int64, next int64) (*Cursor, error) {
	f, err := fsys.OpenNoFollow(path, os.O_RDONLY, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no event log %s: %w", path, crew.ErrNotFound)
		}
		return nil, err
	}
	var num int64
	if off == 0 {
		num = 1
	}
	return &Cursor{path: path, f: f, r: jsonl.NewReader(f, off, num), want: next, from: next - 1}, nil
}

// Next returns the next event. At the end of the log (including before a
// torn last line) it returns io.EOF; calling Next again later returns events
// appended since. A damaged line returns a *DamageError, after which Next
// goes on with the following line. A cursor started after a seq the log
// has not reached yet passes over the events up to it (they come before
// the cursor) without calling them damage.
func (c *Cursor) Next() (Event, error) {
	for {
		l, err := c.r.Next()
		if err == io.EOF {
			if c.replaced() {
				// crew repair renamed a new log into place: follow it
				// from the same seq on.
				f, r, err := jsonl.Open(c.path, c.want-1)
				if err == nil {
					c.f.Close()
					c.f, c.r = f, r
					continue
				}
			}
			// Re-arm, so a later Next sees lines appended meanwhile.
			c.r = jsonl.NewReader(c.f, c.r.Offset(), c.r.Num())
			return Event{}, io.EOF
		}
		if err != nil {
			return Event{}, fmt.Errorf("read %s: %w", c.path, err)
		}
		damage := func(reason string) error {
			return &DamageError{File: c.path, Line: l.Num, Offset: l.Offset, Len: int64(len(l.Data)) + 1, Seq: c.want, Reason: reason}
		}
		e, err := Decode(l.Data)
		if err != nil {
			return Event{}, damage("unreadable event: " + err.Error())
		}
		switch {
		case e.Seq > c.want:
			err := damage(fmt.Sprintf("seq gap: found seq %d", e.Seq))
			c.want = e.Seq + 1
			return e, err
		case e.Seq <= c.from && c.want == c.from+1:
			continue // the log is still catching up to the cursor's start
		case e.Seq < c.want:
			return Event{}, damage(fmt.Sprintf("seq %d out of order", e.Seq))
		}
		c.want++
		return e, nil
	}
}

// ErrStopScan, returned by a Scan callback, ends the scan without an error.
var ErrStopScan = errors.New("stop scan")

// Scan calls fn with each readable event from the cursor on, in order,
// until the end of the log or until fn returns an error (ErrStopScan ends it
// cleanly). A damaged line is handed to damage, when not nil, and skipped;
// the event just after a seq gap is handed to both. Scan returns fn's error
// or an I/O error (which, unlike damage, would repeat on every Next).
func (c *Cursor) Scan(damage func(*DamageError), fn func(*Event) error) error {
	return Scan(c.Next, damage, fn)
}

// Scan is Cursor.Scan for any source of events: next returns them in
// order, io.EOF at the end and a *DamageError for a damaged place (with
// the event, when one follows a seq gap), like Cursor.Next. A run kept
// elsewhere than a file (package run's remote cursor) scans with it.
func Scan(next func() (Event, error), damage func(*DamageError), fn func(*Event) error) error {
	for {
		e, err := next()
		if err == io.EOF {
			return nil
		}
		var de *DamageError
		if errors.As(err, &de) {
			if damage != nil {
				damage(de)
			}
			if e.Seq == 0 {
				continue
			}
		} else if err != nil {
			return err
		}
		if err := fn(&e); err != nil {
			if err == ErrStopScan {
				return nil
			}
			return err
		}
	}
}

// replaced reports whether the file at the cursor's path is no longer the
// one it reads (repair writes a new log and renames it over the old one).
func (c *Cursor) replaced() bool {
	cur, err1 := os.Stat(c.path)
	own, err2 := c.f.Stat()
	return err1 == nil && err2 == nil && !os.SameFile(cur, own)
}

// Offset is the byte offset where the next event starts.
func (c *Cursor) Offset() int64 { return c.r.Offset() }

// Seq is the seq of the last event returned (the starting seq before any).
func (c *Cursor) Seq() int64 { return c.want - 1 }

// Close closes the file.
func (c *Cursor) Close() error { return c.f.Close() }

// Writer appends events to a log. Its owner must hold the run lock for its
// whole life: CutTorn and Append assume no other writer.
type Writer struct {
	f    *os.File
	size int64
}

// OpenWriter opens the log at path for appending and cuts a torn last line
// off it (see the package comment). The file must exist, and be a regular
// file: a symbolic link is refused (fsys.ErrLink), never written through.
func OpenWriter(path string) (*Writer, error) {
	f, err := fsys.OpenNoFollow(path, os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no event log %s: %w", path, crew.ErrNotFound)
		}
		return nil, err
	}
	size, _, err := jsonl.CutTorn(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Writer{f: f, size: size}, nil
}

// Size is the size of the log in bytes: where the next event will start.
func (w *Writer) Size() int64 { return w.size }

// Last returns the last event in the log, or ok=false if it is empty. A last
// line that does not decode is a *DamageError.
func (w *Writer) Last() (e Event, ok bool, err error) { return last(w.f) }

func last(f *os.File) (Event, bool, error) {
	l, ok, err := jsonl.LastLine(f)
	if err != nil || !ok {
		return Event{}, false, err
	}
	e, err := Decode(l.Data)
	if err != nil {
		return Event{}, false, &DamageError{File: f.Name(), Offset: l.Offset, Len: int64(len(l.Data)) + 1, Reason: "unreadable last event: " + err.Error()}
	}
	return e, true, nil
}

// Append writes the events, already numbered, as lines at the end of the log
// in one write(2) and fsyncs the file (fsync(2): the data is on stable
// storage when it returns). If the write or the fsync fails, the file is
// truncated back to its previous size and the error returned: the log is as
// it was.
func (w *Writer) Append(evs []Event) error {
	var buf []byte
	for i := range evs {
		line, err := Marshal(&evs[i])
		if err != nil {
			return err
		}
		buf = append(buf, line...)
	}
	return w.AppendRaw(buf)
}

// AppendRaw appends already-encoded lines (each ending in '\n') and fsyncs,
// with Append's rollback on failure.
func (w *Writer) AppendRaw(buf []byte) error {
	_, err := fsys.WriteAt(w.f, buf, w.size)
	if err == nil {
		err = fsys.SyncFile(w.f)
	}
	if err != nil {
		// Roll back: nothing of a failed operation may stay.
		if terr := fsys.TruncateFile(w.f, w.size); terr == nil {
			w.f.Sync()
		}
		return fmt.Errorf("append to %s: %w", w.f.Name(), err)
	}
	w.size += int64(len(buf))
	return nil
}

// Close closes the file.
func (w *Writer) Close() error { return w.f.Close() }
