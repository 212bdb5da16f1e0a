package mailbox

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/fsys"
	"github.com/crew-dev/crew/internal/jsonl"
)

// The JSONL mailbox files of a run, in <run>/mailbox/ (docs/files.md, Mailbox files). Each is a
// projection of events.jsonl: the messages of the kinds whose
// events.KindInfo.File names it, one per line, in seq order (seqs ascend
// but are not dense: the log also holds other events).
const (
	InboxFile    = events.Inbox + ".jsonl"    // leader -> workers: response, follow-up, nudge, broadcast
	OutboxFile   = events.Outbox + ".jsonl"   // workers -> leader: question, report
	SteeringFile = events.Steering + ".jsonl" // leader -> workers: steer
)

// FileFor returns the mailbox file name a message is projected into: its
// kind's file (events.Message.File) and ".jsonl".
func FileFor(m *events.Message) string { return m.File() + ".jsonl" }

// Files lists the mailbox file names.
var Files = []string{InboxFile, OutboxFile, SteeringFile}

// LastSeq returns the seq of the last complete message in the mailbox file
// at path: 0 if the file is missing or empty. It reads backwards from the
// end, so it costs the same on any file size. A last line that does not
// decode is a *events.DamageError; a file that is not a regular one (a
// symbolic link, a FIFO) is not opened: an error wrapping fsys.ErrLink.
func LastSeq(path string) (int64, error) {
	f, err := fsys.OpenNoFollow(path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	l, ok, err := jsonl.LastLine(f)
	if err != nil || !ok {
		return 0, err
	}
	seq, ok := jsonl.SeqOf(l.Data)
	if !ok {
		return 0, &events.DamageError{File: path, Offset: l.Offset, Len: int64(len(l.Data)) + 1, Reason: "unreadable last message"}
	}
	return seq, nil
}

// Append appends messages to the mailbox file at path, creating it with
// mode perm. It cuts a torn last line first, so the caller must hold the run
// lock. The file is a projection of the fsynced log, so it is not fsynced:
// a line lost in a crash is appended again when the projection catches up.
// On a failed write the file is truncated back to its previous size.
func Append(path string, perm os.FileMode, msgs []events.Message) error {
	f, err := fsys.OpenNoFollow(path, os.O_RDWR|os.O_CREATE, perm) // never through a symbolic link
	if err != nil {
		return err
	}
	defer f.Close()
	size, _, err := jsonl.CutTorn(f)
	if err != nil {
		return err
	}
	var buf []byte
	for i := range msgs {
		line, err := events.Marshal(&msgs[i])
		if err != nil {
			return err
		}
		buf = append(buf, line...)
	}
	if _, err := fsys.WriteAt(f, buf, size); err != nil {
		fsys.TruncateFile(f, size)
		return fmt.Errorf("append to %s: %w", path, err)
	}
	return nil
}

// Cursor reads the messages of a mailbox file with seq greater than a
// starting seq. Close it.
type Cursor struct {
	path string
	f    *os.File
	r    *jsonl.Reader
	last int64
}

// Read opens the mailbox file at path after seq since, found by binary
// search. A missing file reads as empty.
func Read(path string, since int64) (*Cursor, error) {
	f, r, err := jsonl.Open(path, since)
	if errors.Is(err, os.ErrNotExist) {
		return &Cursor{path: path, last: since}, nil
	}
	if err != nil {
		return nil, err
	}
	return &Cursor{path: path, f: f, r: r, last: since}, nil
}

// Next returns the next message, io.EOF at the end (before a torn last
// line), or a *events.DamageError for a line that does not decode or whose
// seq does not ascend; after damage Next goes on with the next line.
func (c *Cursor) Next() (events.Message, error) {
	if c.f == nil {
		return events.Message{}, io.EOF
	}
	l, err := c.r.Next()
	if err != nil {
		if err != io.EOF {
			err = fmt.Errorf("read %s: %w", c.path, err)
		}
		return events.Message{}, err
	}
	m, err := events.DecodeMessage(l.Data)
	if err == nil && m.Seq <= c.last {
		err = fmt.Errorf("seq %d out of order", m.Seq)
	}
	if err != nil {
		return events.Message{}, &events.DamageError{File: c.path, Line: l.Num, Offset: l.Offset, Len: int64(len(l.Data)) + 1, Seq: c.last + 1, Reason: "unreadable message: " + err.Error()}
	}
	c.last = m.Seq
	return m, nil
}

// Close closes the file.
func (c *Cursor) Close() error {
	if c.f == nil {
		return nil
	}
	return c.f.Close()
}
