package file

import (
	"hash/crc32"
	"os"
	"sync"

	"github.com/crew-dev/crew/internal/fsys"
	"github.com/crew-dev/crew/internal/jsonl"
	"github.com/crew-dev/crew/state"
)

// A keeper keeps, in a Log that a long-lived process keeps (Store.KeepLogs:
// crew serve, crew mcp), the states State returned, one per kind of state
// (tasks only, every open message, one participant's), each with
// events.jsonl as it was when the state was read up to its offset. State
// then starts from the kept state and reads only the bytes appended since,
// as the NATS store's Log keeps its state, instead of reading a snapshot
// and replaying the log after it on every call (docs/files.md, Snapshots).
//
// A kept state is trusted only while the log is the file it was read
// from, grown or unchanged: the same file (device and inode), not shorter
// than the kept offset, and the line that ends at the kept offset still
// the line the state was read up to: the same bytes (CRC-32), not only
// the same seq, since a log cut back by one event and regrown by crew's
// own writer ends that seq's line at the same offset with another event.
// A log replaced by crew repair, cut, or rewritten by hand fails one of
// these, and the state is read again from a snapshot; so it is when much
// was appended since (snapshotCheaper). A state that met damage is not kept:
// it is read again each time, and says so each time.
//
// A process that asks for a kind of state once (a crew command) keeps
// nothing: a state is kept from the second State call of its kind on, so
// that a short-lived process pays no copy for it.
type keeper struct {
	mu   sync.Mutex            // guards kept, not what it holds
	kept map[string]*keptState // by keptKey
}

// A keptState is one kept state and the log it was read from; st is nil
// while its kind has been asked for only once, and after it was found
// not to match the log or to hold damage. Its lock is held while it is
// read, so that readers of other kinds do not wait.
type keptState struct {
	mu  sync.Mutex
	st  *state.State
	fi  os.FileInfo // events.jsonl, stated before st was read up to st.Offset
	sum uint32      // lineSum of the line of events.jsonl ending at st.Offset
}

// maxKept bounds the kinds of state a Log keeps (one per participant whose
// state is asked for, and two more): past it, it starts again.
const maxKept = 256

// keptKey names what empty tracks: tasks only, every open message, or
// one participant's.
func keptKey(empty *state.State) string {
	if empty.Open == nil {
		return "tasks"
	}
	if only, ok := empty.Only(); ok {
		return "for " + only
	}
	return "whole"
}

// drop forgets every kept state (a repair).
func (k *keeper) drop() {
	k.mu.Lock()
	k.kept = nil
	k.mu.Unlock()
}

// keptState is State for a Log that a long-lived process keeps: the kept
// state of empty's kind brought up to the log's end, when the log is the
// one it was read from, and otherwise (or the first times) readState's.
// One stat(2) when nothing was appended; otherwise also the new bytes.
func (l *Log) keptState(empty *state.State) (*state.State, error) {
	c, first := l.keep.entry(keptKey(empty))
	if first {
		return l.readState(empty) // a crew command may ask no more
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	fi, err := os.Stat(l.EventsPath())
	if err != nil {
		c.st = nil
		return l.readState(empty)
	}
	if c.st != nil {
		if sameVersion(c.fi, fi) {
			return c.st.Copy(), nil
		}
		if os.SameFile(c.fi, fi) && fi.Size() >= c.st.Offset && !l.snapshotCheaper(empty, fi.Size()-c.st.Offset) {
			if sum, ok := l.readOn(c.st, c.sum, fi); ok {
				c.fi, c.sum = fi, sum
				return c.st.Copy(), nil
			}
		}
		c.st = nil // not the log it was read from (or far behind it): read it again, and keep that
	}
	st, err := l.readState(empty)
	if err != nil || len(st.Damage) > 0 {
		return st, err // not kept
	}
	if sum, ok := l.lineSumAt(st.Offset, fi); ok {
		c.st, c.fi, c.sum = st.Copy(), fi, sum
	}
	return st, nil
}

// entry returns the kept state of kind key, made when first is set: its
// kind is asked for the first time.
func (k *keeper) entry(key string) (c *keptState, first bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if c := k.kept[key]; c != nil {
		return c, false
	}
	if k.kept == nil || len(k.kept) >= maxKept {
		k.kept = map[string]*keptState{}
	}
	c = &keptState{}
	k.kept[key] = c
	return c, true
}

// readOnMax is how many bytes appended since a kept state it reads on
// (readOn) rather than start from a snapshot, which is at most some 128
// events behind the log (snapshotEvery), whatever the size of that
// snapshot; above it, the snapshot when it is the smaller read.
const readOnMax = 64 << 10

// snapshotCheaper reports whether reading the snapshot a state of
// empty's kind starts from (tasks.json, or open.jsonl) costs less than
// replaying the gap bytes appended since a kept state: a process that
// reads seldom while others append much (crew serve's reaping, once a
// second) would otherwise replay all they appended.
func (l *Log) snapshotCheaper(empty *state.State, gap int64) bool {
	if gap <= readOnMax {
		return false
	}
	name := "tasks.json"
	if empty.Open != nil {
		name = "open.jsonl"
	}
	fi, err := os.Stat(l.path(name))
	return err == nil && fi.Size() < gap
}

// readOn brings st, a state read from events.jsonl up to st.Offset, up to
// the log's last complete line, after checking that the line ending at
// st.Offset is still the one of sum (lineSum) and holds st.Seq. fi is the
// log as stated before: the file read must be that one, from open to end
// (a log renamed into place meanwhile is not read on). It returns the
// lineSum of the line ending at the new st.Offset, or false, st then
// unusable, when a check fails, the log cannot be read, or what it read
// is damaged.
func (l *Log) readOn(st *state.State, sum uint32, fi os.FileInfo) (uint32, bool) {
	f, ok := l.openLogOf(fi)
	if !ok {
		return 0, false
	}
	defer f.Close()
	line, ok, err := jsonl.LineBefore(f, st.Offset)
	if err != nil || !ok || lineSum(line.Data) != sum {
		return 0, false
	}
	if seq, ok := jsonl.SeqOf(line.Data); !ok || seq != st.Seq {
		return 0, false
	}
	complete, _, err := jsonl.CompleteSize(f)
	if err != nil || complete < st.Offset {
		return 0, false
	}
	if _, err := l.replay(st, complete, 0, nil); err != nil || len(st.Damage) > 0 {
		return 0, false
	}
	now, err := os.Stat(l.EventsPath())
	if err != nil || !os.SameFile(now, fi) { // replay reads the file by its name
		return 0, false
	}
	return sumBefore(f, st.Offset)
}

// lineSumAt returns the lineSum of the line of events.jsonl that ends at
// off, when the log is still fi's file; false when it cannot be read (the
// state is then not kept).
func (l *Log) lineSumAt(off int64, fi os.FileInfo) (uint32, bool) {
	f, ok := l.openLogOf(fi)
	if !ok {
		return 0, false
	}
	defer f.Close()
	return sumBefore(f, off)
}

// openLogOf opens events.jsonl for reading when it is still fi's file
// (device and inode), never through a link.
func (l *Log) openLogOf(fi os.FileInfo) (*os.File, bool) {
	f, err := fsys.OpenNoFollow(l.EventsPath(), os.O_RDONLY, 0)
	if err != nil {
		return nil, false
	}
	if ffi, err := f.Stat(); err != nil || !os.SameFile(ffi, fi) {
		f.Close()
		return nil, false
	}
	return f, true
}

// sumBefore returns the lineSum of the line of f that ends at off; false
// when no whole line ends there.
func sumBefore(f *os.File, off int64) (uint32, bool) {
	line, ok, err := jsonl.LineBefore(f, off)
	if err != nil || !ok {
		return 0, false
	}
	return lineSum(line.Data), true
}

// lineSum is the CRC-32 (IEEE) of a line's bytes: what a kept state checks the
// line it was read up to against.
func lineSum(line []byte) uint32 {
	return crc32.ChecksumIEEE(line)
}
