package events

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/internal/fsys"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// testEvent is a task.created event with seq seq.
func testEvent(seq int64) Event {
	return Event{Seq: seq, At: Time{time.Date(2026, 11, 29, 21, 4, 5, int(seq%1000)*1e6, time.UTC)},
		Type: TaskCreated, Run: "r1", Task: fmt.Sprintf("t%d", seq), Actor: "leader"}
}

// testLine is testEvent(seq) as a log line.
func testLine(t *testing.T, seq int64) string {
	t.Helper()
	e := testEvent(seq)
	line, err := Marshal(&e)
	if err != nil {
		t.Fatal(err)
	}
	return string(line)
}

// newLog writes a log holding events 1..n through a Writer and returns its
// path.
func newLog(t *testing.T, n int64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := OpenWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var evs []Event
	for seq := int64(1); seq <= n; seq++ {
		evs = append(evs, testEvent(seq))
	}
	if n > 0 {
		if err := w.Append(evs); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// writeLog writes raw lines as a log and returns its path.
func writeLog(t *testing.T, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// appendEvents appends events through a Writer, as the next writer would.
func appendEvents(t *testing.T, path string, seqs ...int64) {
	t.Helper()
	w, err := OpenWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var evs []Event
	for _, s := range seqs {
		evs = append(evs, testEvent(s))
	}
	if err := w.Append(evs); err != nil {
		t.Fatal(err)
	}
}

// drain reads c to io.EOF and returns the seqs of the events it returned
// (an event returned with a seq-gap error included) and the errors.
func drain(t *testing.T, c *Cursor) (seqs []int64, errs []error) {
	t.Helper()
	for i := 0; i < 100000; i++ {
		e, err := c.Next()
		if err == io.EOF {
			return seqs, errs
		}
		if err != nil {
			errs = append(errs, err)
		}
		if e.Seq != 0 {
			seqs = append(seqs, e.Seq)
		}
	}
	t.Fatal("cursor never reached EOF")
	return nil, nil
}

func seqRange(from, to int64) []int64 {
	var s []int64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

func equalSeqs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestReadFromCursor(t *testing.T) {
	path := newLog(t, 50)
	for _, since := range []int64{0, 1, 2, 25, 49, 50, 51, 1000} {
		c, err := Read(path, since)
		if err != nil {
			t.Fatal(err)
		}
		seqs, errs := drain(t, c)
		want := seqRange(since+1, 50)
		if !equalSeqs(seqs, want) || len(errs) > 0 {
			t.Errorf("Read(since %d) gave %v, %v; want %v", since, seqs, errs, want)
		}
		if since <= 50 && c.Seq() != 50 {
			t.Errorf("Read(since %d): Seq() = %d at the end, want 50", since, c.Seq())
		}
		c.Close()
	}
}

func TestCursorSeesLaterAppends(t *testing.T) {
	path := newLog(t, 3)
	c, err := Read(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if seqs, _ := drain(t, c); !equalSeqs(seqs, seqRange(1, 3)) {
		t.Fatalf("first read: %v", seqs)
	}
	for round := int64(0); round < 3; round++ {
		from := 4 + round*2
		appendEvents(t, path, from, from+1)
		seqs, errs := drain(t, c)
		if !equalSeqs(seqs, []int64{from, from + 1}) || len(errs) > 0 {
			t.Fatalf("after appending %d and %d the cursor gave %v, %v", from, from+1, seqs, errs)
		}
	}
	// Damage appended later is still reported by line number.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.WriteString("{garbage\n")
	must(t, err)
	f.Close()
	if seqs, errs := drain(t, c); len(seqs) != 0 || len(errs) != 1 {
		t.Fatalf("after appending a damaged line the cursor gave %v, %v", seqs, errs)
	} else {
		damageOf(t, errs[0], path+":line 10:", "expected seq 10")
	}
	must(t, os.Truncate(path, c.Offset()-int64(len("{garbage\n"))))
	c.Close()
	c, err = Read(path, 9)
	must(t, err)
	defer c.Close()
	drain(t, c)
	end := c.Offset()
	st, _ := os.Stat(path)
	if end != st.Size() {
		t.Errorf("Offset() = %d at the end of a %d-byte log", end, st.Size())
	}
	// A cursor resumed from a saved position sees the same as one that stayed.
	appendEvents(t, path, 10)
	c2, err := ReadAt(path, end, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if seqs, errs := drain(t, c2); !equalSeqs(seqs, []int64{10}) || len(errs) > 0 {
		t.Errorf("ReadAt(saved offset) gave %v, %v", seqs, errs)
	}
}

// TestCursorAfterTornTail: a cursor opened on a log with a torn last line
// (a writer crashed) must see the events the next writer appends after
// cutting it, whether the torn line was longer or shorter than the new
// ones. It once was positioned after the torn bytes and read the middle of
// the new line (damage) or nothing at all.
func TestCursorAfterTornTail(t *testing.T) {
	for _, torn := range []string{`{"seq":4,"at":"2026`, `{"seq":4,"body":"` + strings.Repeat("x", 2000)} {
		path := writeLog(t, testLine(t, 1)+testLine(t, 2)+testLine(t, 3)+torn)
		var cursors []*Cursor
		for _, since := range []int64{0, 2, 3} {
			c, err := Read(path, since)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			drain(t, c)
			cursors = append(cursors, c)
		}
		appendEvents(t, path, 4)
		appendEvents(t, path, 5)
		for i, c := range cursors {
			seqs, errs := drain(t, c)
			if !equalSeqs(seqs, []int64{4, 5}) || len(errs) > 0 {
				t.Errorf("torn tail of %d bytes, cursor %d: after the next writer appended 4 and 5 it gave %v, %v", len(torn), i, seqs, errs)
			}
		}
	}
}

// TestCursorStartedBeyondTheEnd: a cursor after a seq the log has not
// reached returns only what comes after that seq; the events before it,
// appended later, are not damage (they were once reported as "out of
// order").
func TestCursorStartedBeyondTheEnd(t *testing.T) {
	path := newLog(t, 3)
	c, err := Read(path, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if seqs, errs := drain(t, c); len(seqs)+len(errs) > 0 {
		t.Fatalf("gave %v, %v before anything was appended", seqs, errs)
	}
	appendEvents(t, path, seqRange(4, 8)...)
	if seqs, errs := drain(t, c); len(seqs)+len(errs) > 0 {
		t.Fatalf("gave %v, %v for events before its start", seqs, errs)
	}
	appendEvents(t, path, seqRange(9, 12)...)
	if seqs, errs := drain(t, c); !equalSeqs(seqs, []int64{11, 12}) || len(errs) > 0 {
		t.Fatalf("gave %v, %v; want 11, 12", seqs, errs)
	}
	// Past its start, a repeated seq is damage again.
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(testLine(t, 12) + testLine(t, 13))
	f.Close()
	seqs, errs := drain(t, c)
	if !equalSeqs(seqs, []int64{13}) || len(errs) != 1 {
		t.Fatalf("gave %v, %v; want 13 after one damage", seqs, errs)
	}
	damageOf(t, errs[0], "seq 12 out of order", "expected seq 13")
}

// damageOf asserts err is a *DamageError wrapping crew.ErrDamaged whose
// message holds each of parts, and returns it.
func damageOf(t *testing.T, err error, parts ...string) *DamageError {
	t.Helper()
	var de *DamageError
	if !errors.As(err, &de) {
		t.Fatalf("error %v is not a *DamageError", err)
	}
	if !errors.Is(err, crew.ErrDamaged) {
		t.Errorf("%v does not wrap crew.ErrDamaged", err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("damage message %q does not say %q", err, p)
		}
	}
	return de
}

func TestDamageUnreadableLine(t *testing.T) {
	l1, l2 := testLine(t, 1), testLine(t, 2)
	path := writeLog(t, l1+l2+"{this is not json\n"+testLine(t, 3)+testLine(t, 4))
	c, err := Read(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seqs, errs := drain(t, c)
	if !equalSeqs(seqs, seqRange(1, 4)) || len(errs) != 1 {
		t.Fatalf("gave %v, %v; want 1..4 and one damage", seqs, errs)
	}
	de := damageOf(t, errs[0], path+":line 3:", "unreadable event", "expected seq 3")
	if de.Line != 3 || de.Offset != int64(len(l1+l2)) || de.Len != int64(len("{this is not json\n")) || de.Seq != 3 || de.File != path {
		t.Errorf("DamageError = %+v", de)
	}

	// Valid JSON that is no event is damage too.
	path = writeLog(t, l1+`{"hello":"world"}`+"\n"+`{"seq":2}`+"\n"+l2)
	c2, err := Read(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	seqs, errs = drain(t, c2)
	if !equalSeqs(seqs, seqRange(1, 2)) || len(errs) != 2 {
		t.Fatalf("gave %v, %v; want 1, 2 and two damages", seqs, errs)
	}
	damageOf(t, errs[0], ":line 2:", "no seq", "expected seq 2")
	damageOf(t, errs[1], ":line 3:", "no type", "expected seq 2")
}

func TestDamageSeqGap(t *testing.T) {
	l1, l2, l4 := testLine(t, 1), testLine(t, 2), testLine(t, 4)
	path := writeLog(t, l1+l2+l4+testLine(t, 5))
	c, err := Read(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got []int64
	var errs []error
	for {
		e, err := c.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			errs = append(errs, err)
			if e.Seq != 4 {
				t.Errorf("the gap's error came with event %d, want the event after the gap (4)", e.Seq)
			}
		}
		got = append(got, e.Seq)
	}
	if !equalSeqs(got, []int64{1, 2, 4, 5}) || len(errs) != 1 {
		t.Fatalf("gave %v, %v", got, errs)
	}
	de := damageOf(t, errs[0], path+":line 3:", "seq gap: found seq 4", "expected seq 3")
	if de.Offset != int64(len(l1+l2)) || de.Len != int64(len(l4)) {
		t.Errorf("DamageError = %+v", de)
	}

	// Starting mid-file the line number is unknown: the byte offset is given.
	c2, err := Read(path, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	seqs, errs := drain(t, c2)
	if !equalSeqs(seqs, []int64{4, 5}) || len(errs) != 1 {
		t.Fatalf("Read(since 2) gave %v, %v", seqs, errs)
	}
	damageOf(t, errs[0], fmt.Sprintf("%s:byte %d:", path, len(l1+l2)), "seq gap", "expected seq 3")
}

func TestDamageSeqOutOfOrder(t *testing.T) {
	path := writeLog(t, testLine(t, 1)+testLine(t, 2)+testLine(t, 3)+testLine(t, 2)+testLine(t, 4))
	c, err := Read(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seqs, errs := drain(t, c)
	if !equalSeqs(seqs, seqRange(1, 4)) || len(errs) != 1 {
		t.Fatalf("gave %v, %v; want 1..4 and one damage (the repeated 2 not returned)", seqs, errs)
	}
	damageOf(t, errs[0], path+":line 4:", "seq 2 out of order", "expected seq 4")
}

func TestMissingLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	if _, err := Read(path, 0); !errors.Is(err, crew.ErrNotFound) {
		t.Errorf("Read of a missing log: %v, want crew.ErrNotFound", err)
	}
	if _, err := ReadAt(path, 0, 1); !errors.Is(err, crew.ErrNotFound) {
		t.Errorf("ReadAt of a missing log: %v, want crew.ErrNotFound", err)
	}
	if _, err := OpenWriter(path); !errors.Is(err, crew.ErrNotFound) {
		t.Errorf("OpenWriter of a missing log: %v, want crew.ErrNotFound", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("opening a missing log created it")
	}
}

func TestOpenWriterCutsTornTail(t *testing.T) {
	good := testLine(t, 1) + testLine(t, 2) + testLine(t, 3)
	path := writeLog(t, good+`{"seq":4,"at":"2026-11-29T2`)
	w, err := OpenWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Size() != int64(len(good)) {
		t.Errorf("Size() = %d, want %d (the torn line cut)", w.Size(), len(good))
	}
	data, _ := os.ReadFile(path)
	if string(data) != good {
		t.Fatalf("after OpenWriter the log is %q, want the complete lines only", data)
	}
	if err := w.Append([]Event{testEvent(4)}); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(path)
	if string(data) != good+testLine(t, 4) {
		t.Fatalf("after Append the log is %q: the new line was glued to something", data)
	}
	last, ok, err := w.Last()
	if err != nil || !ok || last.Seq != 4 {
		t.Errorf("Last() = %+v, %v, %v", last, ok, err)
	}
}

func TestWriterLast(t *testing.T) {
	w, err := OpenWriter(writeLog(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := w.Last(); ok || err != nil {
		t.Errorf("Last() of an empty log: ok=%v, %v", ok, err)
	}
	w.Close()

	path := writeLog(t, testLine(t, 1)+"{broken\n")
	w, err = OpenWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	_, ok, err := w.Last()
	if ok {
		t.Error("Last() of a log ending in a damaged line: ok")
	}
	damageOf(t, err, path, "unreadable last event")
}

// TestAppendRollsBack: when the write (after writing half its bytes, as a
// filling disk does) or the fsync fails, Append returns the error and
// leaves the log byte for byte as it was; the next Append works.
func TestAppendRollsBack(t *testing.T) {
	for _, failing := range []fsys.Op{fsys.OpWrite, fsys.OpSync} {
		path := newLog(t, 3)
		before, _ := os.ReadFile(path)
		w, err := OpenWriter(path)
		if err != nil {
			t.Fatal(err)
		}
		var faults int
		restore := fsys.SetFault(func(op fsys.Op, p string) error {
			if op == failing && p == path {
				faults++
				return syscall.ENOSPC
			}
			return nil
		})
		err = w.Append([]Event{testEvent(4), testEvent(5)})
		restore()
		if !errors.Is(err, syscall.ENOSPC) || faults != 1 {
			t.Fatalf("%s failing: Append = %v (%d faults), want ENOSPC", failing, err, faults)
		}
		after, _ := os.ReadFile(path)
		if !bytes.Equal(before, after) {
			t.Fatalf("%s failing: the log changed:\n%q\nwant\n%q", failing, after, before)
		}
		if w.Size() != int64(len(before)) {
			t.Errorf("%s failing: Size() = %d, want %d", failing, w.Size(), len(before))
		}
		if err := w.Append([]Event{testEvent(4)}); err != nil {
			t.Fatalf("%s failing: the next Append: %v", failing, err)
		}
		w.Close()
		c, err := Read(path, 0)
		if err != nil {
			t.Fatal(err)
		}
		seqs, errs := drain(t, c)
		c.Close()
		if !equalSeqs(seqs, seqRange(1, 4)) || len(errs) > 0 {
			t.Errorf("%s failing: the log then reads %v, %v", failing, seqs, errs)
		}
	}
}

// A follower (events --follow, watch) must go on with the new log when
// crew repair renames one over the old: reading the unlinked old file it
// would never see another event.
func TestCursorFollowsReplacedLog(t *testing.T) {
	path := newLog(t, 3)
	c, err := Read(path, 0)
	must(t, err)
	defer c.Close()
	if seqs, errs := drain(t, c); !equalSeqs(seqs, seqRange(1, 3)) || len(errs) > 0 {
		t.Fatalf("before: seqs %v, errors %v", seqs, errs)
	}
	// The repaired log: the same three events plus two, renamed into place.
	var b strings.Builder
	for seq := int64(1); seq <= 5; seq++ {
		b.WriteString(testLine(t, seq))
	}
	tmp := path + ".tmp"
	must(t, os.WriteFile(tmp, []byte(b.String()), 0o600))
	must(t, os.Rename(tmp, path))
	seqs, errs := drain(t, c)
	if !equalSeqs(seqs, seqRange(4, 5)) || len(errs) > 0 {
		t.Fatalf("after the log was replaced: seqs %v, errors %v; want 4 and 5", seqs, errs)
	}
}

// Scan hands damage to its callback and goes on, passes the event after a
// gap to both, stops cleanly on ErrStopScan and returns any other error.
func TestScan(t *testing.T) {
	path := writeLog(t, testLine(t, 1)+"{not json\n"+testLine(t, 3)+testLine(t, 5)+testLine(t, 6))
	scan := func(fn func(*Event) error) (seqs []int64, damage []int64, err error) {
		c, err := Read(path, 0)
		must(t, err)
		defer c.Close()
		err = c.Scan(func(de *DamageError) { damage = append(damage, de.Seq) }, func(e *Event) error {
			seqs = append(seqs, e.Seq)
			return fn(e)
		})
		return seqs, damage, err
	}
	seqs, damage, err := scan(func(*Event) error { return nil })
	if err != nil || !equalSeqs(seqs, []int64{1, 3, 5, 6}) || !equalSeqs(damage, []int64{2, 2, 4}) {
		t.Fatalf("scan: seqs %v, damage at %v, err %v; want 1 3 5 6; damage: the bad line and the gap at 2, the gap at 4", seqs, damage, err)
	}
	seqs, _, err = scan(func(e *Event) error {
		if e.Seq == 3 {
			return ErrStopScan
		}
		return nil
	})
	if err != nil || !equalSeqs(seqs, []int64{1, 3}) {
		t.Fatalf("ErrStopScan: seqs %v, err %v", seqs, err)
	}
	boom := errors.New("boom")
	if _, _, err = scan(func(*Event) error { return boom }); err != boom {
		t.Fatalf("callback error: got %v", err)
	}
}
