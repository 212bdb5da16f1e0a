package file

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/fsys"
	"github.com/crew-dev/crew/internal/jsonl"
	"github.com/crew-dev/crew/state"

	sjson "github.com/segmentio/encoding/json"
)

// The snapshots: tasks.json (the tasks, sealed with a CRC and rewritten
// keeping inodes) and open.jsonl (the open messages), both projections of
// the log that readers start from instead of replaying it whole
// (docs/files.md, Snapshots). Neither is fsynced: a lost or torn one is
// rebuilt from the log.

// readSnapshot returns the state in tasks.json when it matches the log
// (the line just before its offset has its seq), else an empty state: a
// missing, stale-beyond-the-log or corrupt snapshot is rebuilt from the log
// without user action. The state has its tasks only (State.Open is nil).
func (l *Log) readSnapshot() *state.State {
	empty := state.NewTasks()
	for range 3 { // a snapshot read while it was rewritten is read again
		data, current, err := readSnapshotFile(l.path("tasks.json"))
		if err != nil {
			return empty
		}
		obj, whole := openJSON(data)
		if !whole || !current {
			continue
		}
		st := &state.State{}
		if decodeTasks(obj, st) != nil || !l.matchesLog(st) {
			return empty
		}
		return st
	}
	return empty
}

// writeSnapshot replaces tasks.json atomically, keeping inodes
// (rewriteKeepingInodes: it is rewritten after every burst of commits),
// sealed with its checksum (sealJSON). It is a projection, so it is not
// fsynced: a lost snapshot is rebuilt from the log.
func (l *Log) writeSnapshot(st *state.State) error {
	data, err := encodeTasks(st)
	if err != nil {
		return err
	}
	return rewriteKeepingInodes(l.path("tasks.json"), l.store.Perm.File, func(w io.Writer) error {
		_, err := w.Write(sealJSON(data))
		return err
	})
}

// decodeTasks and encodeTasks are how a state's tasks are read from
// tasks.json and open.jsonl's second line, and written to tasks.json:
// what encoding/json reads and writes (TestTasksJSONAsStdlib), with
// segmentio's decoder and encoder, because most commands of a run decode
// every task. A run of 1,000 tasks (327 KB) decodes in 1.6 ms instead of
// 3.9 and encodes in 1.9 instead of 2.6.
//
// A state for one task (state.State.OneTask: what a worker's hook,
// inbox and pending read) decodes that task only: the others are left
// as the bytes they are in data (tasksLine), which the decoder checks
// are well-formed JSON but does not decode (TestDecodeOneTask). At 1,000
// tasks their decode was most of the work of a worker's command.
func decodeTasks(data []byte, st *state.State) error {
	id, one := st.OneTask()
	if !one {
		return sjson.Unmarshal(data, st)
	}
	line := tasksLine{State: st}
	// The undecoded tasks, and their ids, are data's bytes: only task id
	// is decoded, and copied.
	rest, err := sjson.Parse(data, &line, sjson.DontCopyRawMessage|sjson.DontCopyString)
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("%d bytes after the value", len(rest))
	}
	if err != nil {
		return err
	}
	st.Tasks = map[string]*state.Task{}
	if value := line.Tasks[id]; value != nil && string(value) != "null" {
		t := new(state.Task)
		if err := sjson.Unmarshal(value, t); err != nil {
			return err
		}
		st.Tasks[id] = t
	}
	return nil
}

// tasksLine is a state as tasks.json holds it with its tasks left
// undecoded: its Tasks, less deep than the State's, hides that field
// (encoding/json's rule for embedded fields), and is read as that field
// would be (a repeated key adds its tasks, null empties them).
type tasksLine struct {
	*state.State
	Tasks map[string]sjson.RawMessage `json:"tasks"`
}

func encodeTasks(st *state.State) ([]byte, error) { return sjson.Marshal(st) }

// snapshotEvery is how many events tasks.json may fall behind what a
// process has projected: a reader replays at most that many events after
// it. The rule holds across lock epochs: a process that commits once per
// epoch (crew serve answering one MCP call after another) does not
// rewrite tasks.json each time it lets the lock go, as long as tasks.json
// is still the file it wrote, or read under the run lock
// (snapshotter.fi). Sync and Store.Close write what is owed: tasks.json
// when it is due (tasksDue), else the projection mark.
const snapshotEvery = 128

// tasksDue reports whether tasks.json, behind events behind a state of
// n tasks, is due to be written when a process lets the run lock go:
// once it is behind by 1 + n/32 events, and at most snapshotEvery.
// Writing it costs about 2 µs a task (encoding, then writing the bytes);
// keeping it behind costs every later reader the replay of the events
// after it, a few µs each. So a run of 10 tasks has it rewritten by
// every command, as before, and a run of 1,000 every 32 events, not the
// 0.33 MB of it by each one-shot crew command on its way out.
func tasksDue(behind int64, n int) bool {
	return behind >= min(snapshotEvery, 1+int64(n)/32)
}

// A snapshotter writes a Log's snapshots, tasks.json and open.jsonl,
// and knows how far they are. Its lock is mu, held while tasks.json is
// written too (one writer at a time); what it knows of open.jsonl is
// read and set without it (atomics), so that a commit never waits for a
// snapshot being written.
type snapshotter struct {
	mu sync.Mutex // guards seq, fi, stale and pending; held while tasks.json is written
	// seq is the seq of the state in tasks.json, when this process wrote
	// it (0: unknown), and fi the file as lstat(2) said right after;
	// stale: the lock epoch ended since, so fi is checked before seq is
	// trusted again (known). pending is a later state, written when it
	// is due (snapshotEvery), at Sync or at Store.Close.
	seq     int64
	fi      os.FileInfo
	stale   bool
	pending *state.State
	// open.jsonl as this process last read or wrote it
	// (openSnapshotState).
	openSeq, openCount atomic.Int64
	openKnown          atomic.Bool
}

// known checks, when the lock epoch ended since this process wrote
// tasks.json, that the file is still the one it wrote (sameVersion: a
// rewrite by another process renames another inode into place, and any
// write moves the change time). If not, it learns the seq of the one
// there now (snapshotSeq), and forgets a pending state no later than
// that: a later one is still owed. (Forgetting it too left a commit
// neither in tasks.json nor in the mark when another process wrote an
// earlier state between this one's letting the lock go and its flush.)
// The caller holds the snapshotter's lock and the run lock.
func (l *Log) known() {
	s := &l.snap
	if !s.stale {
		return
	}
	s.stale = false
	path := l.path("tasks.json")
	if s.fi != nil && unchanged(path, s.fi) {
		return
	}
	s.seq, s.fi = 0, nil // unknown: a pending state is written
	if fi, err := os.Lstat(path); err == nil {
		if seq, ok := snapshotSeq(path); ok {
			s.seq, s.fi = seq, fi
		}
	}
	if s.pending != nil && s.pending.Seq <= s.seq {
		s.pending = nil
	}
}

// snapshotSeq returns the seq tasks.json at path starts with
// ({"seq":N,…: its first key, as encodeTasks writes it), read from its
// first bytes only; ok=false when it does not start so. Only a holder of
// the run lock writes tasks.json, so under the lock the file is whole.
func snapshotSeq(path string) (seq int64, ok bool) {
	f, err := openSnapshot(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	var buf [32]byte
	n, _ := io.ReadFull(f, buf[:])
	rest, ok := bytes.CutPrefix(buf[:n], []byte(`{"seq":`))
	i := bytes.IndexByte(rest, ',')
	if !ok || i <= 0 {
		return 0, false
	}
	seq, err = strconv.ParseInt(string(rest[:i]), 10, 64)
	return seq, err == nil && seq > 0
}

// endEpoch is the snapshotter's part of the end of a lock epoch: what it
// knows of tasks.json is checked before it is trusted again (known), and
// a pending state is kept, to be written when due. The caller holds the
// snapshotter's lock.
func (s *snapshotter) endEpoch() { s.stale = s.seq != 0 }

// forget forgets what the snapshotter knows of tasks.json and the state
// it owes it, after a repair rewrote the run's files. The caller holds
// its lock.
func (s *snapshotter) forget() { s.seq, s.fi, s.stale, s.pending = 0, nil, false, nil }

// checkpoint writes st (the state after a projection job) to tasks.json
// when it is due, and otherwise keeps it to write later. The caller
// holds the run lock.
func (l *Log) checkpoint(st *state.State) error {
	s := &l.snap
	s.mu.Lock()
	defer s.mu.Unlock()
	l.known()
	if s.pending == nil || s.pending.Seq < st.Seq {
		s.pending = st
	}
	if s.seq != 0 && st.Seq-s.seq < snapshotEvery {
		return nil
	}
	return l.writePending(true)
}

// owes reports whether a state is pending, not yet written to tasks.json.
func (s *snapshotter) owes() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending != nil
}

// flushSnapshot writes the pending state, if any, under the run lock
// (the hold of the caller, or one taken for it): to tasks.json when it
// is due (tasksDue), else only its projection mark.
func (l *Log) flushSnapshot() error {
	if !l.snap.owes() {
		return nil
	}
	if err := l.holdFor(context.Background(), true); err != nil {
		return err
	}
	defer l.unholdFor(true)
	l.snap.mu.Lock()
	defer l.snap.mu.Unlock()
	l.known()
	return l.writePending(false)
}

// writePending writes the pending state, unless there is none or
// tasks.json already holds a later one: to tasks.json and then the
// projection mark when tasks is set, tasks.json's seq is unknown or it
// is due (tasksDue), else to the mark only. The caller holds the
// snapshotter's lock and the run lock, and has called known.
func (l *Log) writePending(tasks bool) error {
	s := &l.snap
	st := s.pending
	s.pending = nil
	if st == nil || st.Seq <= s.seq {
		return nil
	}
	if !tasks && s.seq != 0 && !tasksDue(st.Seq-s.seq, len(st.Tasks)) {
		return l.writeMark(st)
	}
	if err := l.writeSnapshot(st); err != nil {
		s.seq, s.fi = 0, nil
		return err
	}
	l.noteWritten(st.Seq)
	return l.writeMark(st)
}

// noteWritten notes that tasks.json holds the state at seq, which this
// process wrote (or read: noteRead), and what lstat(2) says of the file
// now. The caller holds the run lock and the snapshotter's lock.
func (l *Log) noteWritten(seq int64) {
	s := &l.snap
	fi, err := os.Lstat(l.path("tasks.json"))
	if err != nil {
		s.seq, s.fi = 0, nil // unknown: the next checkpoint writes it
		return
	}
	s.seq, s.fi = max(s.seq, seq), fi
}

// noteRead notes that tasks.json holds the state at seq, as this process
// read it under the run lock, when the snapshotter knows of none yet (the
// process's first load: its own writes are later). The caller holds the
// run lock.
func (l *Log) noteRead(seq int64) {
	s := &l.snap
	s.mu.Lock()
	defer s.mu.Unlock()
	l.known()
	if s.seq == 0 && seq != 0 {
		l.noteWritten(seq)
	}
}

// The projection mark, projected.json, says how far a run's projections
// are written: the seq and byte offset of the last event whose mailbox
// lines, mail-tree copies and read flags are written, and where each
// mailbox file ends then (State.Files), sealed like tasks.json
// (sealJSON):
//
//	{"seq":12,"offset":3301,"files":{"inbox":8,"outbox":10,"steering":7},"crc32":"5f7de258"}
//
// tasks.json says as much, but grows with the tasks; the mark lets a
// process that lets the run lock go (every one-shot crew command, on its
// way out) say that its projections are done without rewriting every
// task: the next writer starts from tasks.json, replays the log after it,
// and projects again only the events after the mark. Only writers read
// it, under the run lock, so no reader meets it half-written: it is
// rewritten in place (no new inode), and a crash or power loss in the
// middle leaves a file whose seal does not match, which is ignored
// (tasks.json then says how far projections got, and the events after it
// are projected again: every projection is idempotent). Like the
// snapshots it is not fsynced, and it is used only if the line of
// events.jsonl that ends at its offset has its seq; crew repair removes
// it before it rebuilds the projections. (docs/files.md, Snapshots.)
type mark struct {
	Seq    int64            `json:"seq"`
	Offset int64            `json:"offset"`
	Files  map[string]int64 `json:"files"`
}

// writeMark writes st's projection mark into projected.json, in place,
// unless the mark there is as far already: another process may have
// written a later one since this one let the run lock go. The caller
// holds the run lock.
func (l *Log) writeMark(st *state.State) error {
	if m, ok := l.readMark(); ok && m.Seq >= st.Seq {
		return nil
	}
	obj, err := json.Marshal(mark{Seq: st.Seq, Offset: st.Offset, Files: st.Files})
	if err != nil {
		return err
	}
	data := sealJSON(obj)
	f, err := openOwn(l.path("projected.json"), l.store.Perm.File)
	if err != nil {
		return err
	}
	_, err = fsys.WriteAt(f, data, 0)
	if err == nil {
		err = fsys.TruncateFile(f, int64(len(data)))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readMark returns the projection mark in projected.json when it is whole
// and matches the log (endsAt), else ok=false: a missing, torn, hand-made
// or stale mark says nothing. The caller holds the run lock.
func (l *Log) readMark() (m mark, ok bool) {
	f, err := openSnapshot(l.path("projected.json"))
	if err != nil {
		return mark{}, false
	}
	data, err := io.ReadAll(io.LimitReader(f, 64<<10))
	f.Close()
	if err != nil {
		return mark{}, false
	}
	obj, whole := openJSON(data)
	if !whole || json.Unmarshal(obj, &m) != nil || m.Files == nil {
		return mark{}, false
	}
	return m, l.endsAt(m.Seq, m.Offset)
}

// openDue reports whether open.jsonl, last written at seq since with
// count open messages, should be written again for a state at seq: once
// the events after it would cost a reader more to replay than the
// snapshot costs to write (every 128 events, or one per four open
// messages when there are more).
func openDue(seq, since, count int64) bool {
	return seq-since >= 128+count/4
}

// openReadMax is the largest read buffer readOpenSnapshot makes (bytes).
const openReadMax = 4 << 20

// openHeader is the first line of open.jsonl: which state it holds, and
// how many open messages, so that a writer can tell whether it is due
// without reading the rest.
type openHeader struct {
	Seq    int64 `json:"seq"`
	Offset int64 `json:"offset"`
	Open   int64 `json:"open"`
}

// openSnapshotState returns the seq and open-message count of open.jsonl
// as this process last read or wrote it, reading its first line if it has
// not (0, 0 when there is none).
func (l *Log) openSnapshotState() (seq, count int64) {
	if l.snap.openKnown.Load() {
		return l.snap.openSeq.Load(), l.snap.openCount.Load()
	}
	var h openHeader
	if f, err := openSnapshot(l.path("open.jsonl")); err == nil {
		if line, err := jsonl.NewReader(f, 0, 1).Next(); err == nil {
			json.Unmarshal(line.Data, &h)
		}
		f.Close()
	}
	l.noteOpenSnapshot(h.Seq, h.Open)
	return h.Seq, h.Open
}

func (l *Log) noteOpenSnapshot(seq, count int64) {
	l.snap.openSeq.Store(seq)
	l.snap.openCount.Store(count)
	l.snap.openKnown.Store(true)
}

// openLine is one line of open.jsonl after the first two: an open message
// and its key in State.Open.
type openLine struct {
	Key string `json:"key"`
	state.Open
}

// writeOpenSnapshot writes open.jsonl: a header (openHeader), the state's
// tasks as tasks.json holds them, then one open message per line, in seq
// order. Like tasks.json it is a projection, replaced atomically and not
// fsynced; unlike it, it is not rewritten on every commit (see openDue): a
// reader that needs the open messages reads it and replays the log after
// it.
func (l *Log) writeOpenSnapshot(st *state.State) error {
	err := writeAtomicFunc(l.path("open.jsonl"), l.store.Perm.File, false, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(openHeader{Seq: st.Seq, Offset: st.Offset, Open: int64(len(st.Open))}); err != nil {
			return err
		}
		if err := enc.Encode(st.ShareTasks()); err != nil {
			return err
		}
		keys := make([]string, 0, len(st.Open))
		for k := range st.Open {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			a, b := st.Open[keys[i]], st.Open[keys[j]]
			if a.Seq != b.Seq {
				return a.Seq < b.Seq
			}
			return keys[i] < keys[j]
		})
		for _, k := range keys {
			if err := enc.Encode(openLine{Key: k, Open: *st.Open[k]}); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		l.noteOpenSnapshot(st.Seq, int64(len(st.Open)))
	}
	return err
}

// readOpenSnapshot returns the whole state in open.jsonl when it matches
// the log, or an empty state. It keeps the open messages empty tracks
// (state.For: one participant's), and returns empty.Fresh() when there
// is no usable snapshot.
func (l *Log) readOpenSnapshot(empty *state.State) *state.State {
	fresh := empty.Fresh
	f, err := openSnapshot(l.path("open.jsonl"))
	if err != nil {
		return fresh()
	}
	defer f.Close()
	// A read buffer the file's size, up to openReadMax: its tasks line is
	// then read where it lands, not gathered in a buffer that doubles
	// (1.2 MB of fresh memory for a run of 1,000 tasks, in a process
	// that has just started: most of the cost of reading the file).
	size := int64(64 << 10)
	if fi, err := f.Stat(); err == nil {
		size = min(max(fi.Size()+1, 4<<10), openReadMax)
	}
	rd := jsonl.NewReaderSize(f, 0, 1, int(size))
	var h openHeader
	if line, err := rd.Next(); err != nil || json.Unmarshal(line.Data, &h) != nil {
		return fresh()
	}
	line, err := rd.Next()
	if err != nil {
		return fresh()
	}
	st := fresh()
	st.Files = nil
	if decodeTasks(line.Data, st) != nil || st.Seq != h.Seq || st.Offset != h.Offset || !l.matchesLog(st) {
		return fresh()
	}
	st.Open = make(map[string]*state.Open, min(h.Open, 1<<20))
	theirs := othersLine(st)
	n := int64(0)
	var ol openLine // one for every line: each open message is then one allocation, its Open
	for {
		line, err := rd.Next()
		if err != nil {
			break // the end: the file was renamed into place whole
		}
		if theirs(line.Data) {
			n++ // counted, not decoded: a state for one participant keeps none of it
			continue
		}
		ol = openLine{}
		// segmentio's decoder: as encoding/json, in a third of the time (events.DecodeMessage)
		if sjson.Unmarshal(line.Data, &ol) != nil || ol.ID == "" || (ol.Key != ol.ID && ol.Key != state.Key(ol.ID, events.Broadcast, ol.Task)) {
			return fresh()
		}
		n++
		if !st.Tracks(ol.Task) {
			continue
		}
		o := new(state.Open)
		*o = ol.Open
		o.Task, o.Kind, o.File, o.Priority, o.Status, o.From = state.Intern(o.Task), state.Intern(o.Kind), state.Intern(o.File), state.Intern(o.Priority), state.Intern(o.Status), state.Intern(o.From)
		key := o.ID // the same string: one copy
		if ol.Key != o.ID {
			key = ol.Key
		}
		st.Open[key] = o
	}
	if n != h.Open {
		return fresh() // cut short: not the file a writer renamed into place
	}
	l.noteOpenSnapshot(st.Seq, n)
	return st
}

// othersLine returns, for a state that tracks one participant's open
// messages (state.For), a test that tells an open.jsonl line holding
// another participant's message without decoding it, and for any other
// state one that always says no. Most lines of a run's open.jsonl are
// other participants' (a worker's inbox reads its own few), and decoding
// them was most of the work of reading it.
//
// The lines are written compact (writeOpenSnapshot), beginning with the
// key, the id and the seq, which hold no quote, then "task":"<recipient>";
// ids hold no character JSON escapes (crew.ValidateID). A line is
// another's when it begins and ends as such a line and its first
// "task":" is followed by a valid id, or "" (the leader), that is not the
// participant. Any other line is decoded and checked as before, so that a
// damaged recipient still makes the snapshot unusable rather than hiding
// one of the participant's messages.
func othersLine(st *state.State) func([]byte) bool {
	only, ok := st.Only()
	if !ok {
		return func([]byte) bool { return false }
	}
	return func(line []byte) bool {
		if !bytes.HasPrefix(line, []byte(`{"key":"`)) || !bytes.HasSuffix(line, []byte("}")) {
			return false
		}
		_, rest, found := bytes.Cut(line, []byte(`"task":"`))
		to, _, closed := bytes.Cut(rest, []byte(`"`))
		if !found || !closed || string(to) == only {
			return false
		}
		return len(to) == 0 || crew.ValidateID("task", string(to)) == nil
	}
}

// matchesLog reports whether a snapshot's seq and offset agree with the
// log: the line that ends at its offset has its seq. It also fills in
// what a snapshot from an older crew lacks.
func (l *Log) matchesLog(st *state.State) bool {
	if st.Files == nil || !l.endsAt(st.Seq, st.Offset) {
		return false
	}
	if st.Tasks == nil {
		st.Tasks = map[string]*state.Task{}
	}
	if st.Run == "" {
		st.Run = l.manifest.ID
	}
	return true
}

// removeMark removes the projection mark before a repair rebuilds the
// projections: it says nothing of what the rebuild writes, and a log
// repair rewrote, with lines moved or renumbered, could hold a line
// that matches a mark of the old one. (A repair that fails before its
// new log is in place leaves every file as it was, the mark too.)
// Anything at its name that is not a regular file is never read as a
// mark (openSnapshot), and is left alone.
func (l *Log) removeMark() error {
	path := l.path("projected.json")
	err := os.Remove(path)
	if fi, lerr := os.Lstat(path); err == nil || errors.Is(err, fs.ErrNotExist) || (lerr == nil && !fi.Mode().IsRegular()) {
		return nil
	}
	return err
}

// endsAt reports whether the line of the log that ends at byte offset
// holds seq (both positive).
func (l *Log) endsAt(seq, offset int64) bool {
	if seq <= 0 || offset <= 0 {
		return false
	}
	f, err := fsys.OpenNoFollow(l.EventsPath(), os.O_RDONLY, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	line, ok, err := jsonl.LineBefore(f, offset)
	if err != nil || !ok {
		return false
	}
	got, ok := jsonl.SeqOf(line.Data)
	return ok && got == seq
}

// rewriteKeepingInodes replaces the file at path with what fill writes,
// as a rename over it does for readers that open it afterwards (they see
// the old file or the new one whole), but without creating a file or
// deleting one: the new content is written into a spare file kept beside
// it, ".<name>.spare", which then takes the name, and the replaced file
// becomes the spare for the next time:
//
//	write .<name>.spare    (truncated first; a hidden name readers never open)
//	link  <name> -> .<name>.old
//	rename .<name>.spare -> <name>
//	rename .<name>.old -> .<name>.spare
//
// Why: a projection rewritten on every commit would otherwise free an
// inode each time, and ext4 without a journal (this project's CI disks)
// does not reuse a freed inode for a minute or more, but walks past every
// one of them on each new file it creates (fs/ext4/ialloc.c,
// recently_deleted), so that creating a message's mail-tree copy grew
// from about 15 µs to over 100 µs under a steady rewrite.
//
// A crash at any step leaves the file whole (the old or the new), and at
// worst a stale .old or no spare, both mended by the next call; a spare
// it cannot use is replaced (openOwn), and where none can be made it
// writes a new file and renames it over, freeing an inode. A reader
// still holding the replaced file open when the spare is rewritten two
// calls later can see a mix of the two or a part of the new, so the
// content must tell whether it is whole (sealJSON, openJSON), or the new
// whole before it is renamed into place, so the reader must check that
// the file is still at path once read (readSnapshotFile). The file is
// not fsynced: it is a projection.
func rewriteKeepingInodes(path string, perm os.FileMode, fill func(io.Writer) error) error {
	dir, name := filepath.Split(path)
	spare := filepath.Join(dir, "."+name+".spare")
	old := filepath.Join(dir, "."+name+".old")
	f, err := openOwn(spare, perm)
	if err != nil {
		// No spare this process can write (a directory took its name, or
		// the directory refuses a new file): a new file renamed over the
		// old one, as any atomic rewrite, frees an inode this time.
		return writeAtomicFunc(path, perm, false, fill)
	}
	err = fsys.TruncateFile(f, 0)
	if err == nil {
		w := bufio.NewWriterSize(fsysWriter{f}, 64<<10)
		if err = fill(w); err == nil {
			err = w.Flush()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// The spare could not be rewritten (a truncate or write that
		// failed): the new content goes the way it goes without a
		// spare. A full disk fails there too, and says so.
		return writeAtomicFunc(path, perm, false, fill)
	}
	// Keep the file being replaced (if any) as the next spare.
	err = os.Link(path, old)
	if errors.Is(err, fs.ErrExist) {
		os.Remove(old) // left by a crash between the link and the renames
		err = os.Link(path, old)
	}
	kept := err == nil // else (no file yet, a directory, a full directory) it is not kept
	if err := fsys.RenameFile(spare, path); err != nil {
		if kept {
			os.Remove(old)
		}
		return err
	}
	if kept {
		os.Rename(old, spare) // failing, .old is mended next time
	}
	return nil
}

// openOwn opens a file crew rewrites in place (a snapshot's spare, the
// projection mark) for writing, creating it if missing. It must be a
// regular file with no other name (a hard link elsewhere, a backup made
// with cp -al say, would be rewritten too) whose mode this process can
// set (its owner's: a shared-group run has writers of several users);
// anything else at its name is removed, never written through
// (docs/files.md, Permissions), and a new file made.
func openOwn(spare string, perm os.FileMode) (*os.File, error) {
	f, err := fsys.OpenNoFollow(spare, os.O_WRONLY|os.O_CREATE, perm)
	if err == nil {
		fi, err := f.Stat()
		if err == nil && fsys.Links(fi) == 1 && (fi.Mode().Perm() == perm.Perm() || f.Chmod(perm) == nil) {
			return f, nil
		}
		f.Close()
	}
	if err := os.Remove(spare); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	f, err = fsys.OpenFile(spare, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// openSnapshot opens a snapshot file (tasks.json, open.jsonl) for
// reading. It must be a regular file: a symbolic link, a FIFO or a
// device (whose reading could block, or never end) is refused with an
// error wrapping fsys.ErrLink, and the snapshot is then rebuilt from the
// log like any unusable one.
func openSnapshot(path string) (*os.File, error) { return fsys.OpenNoFollow(path, os.O_RDONLY, 0) }

// testHookSnapshotOpened, when set (by a test), is called when
// readSnapshotFile has opened a snapshot file, before it reads it.
var testHookSnapshotOpened func()

// readSnapshotFile reads the whole snapshot file at path (openSnapshot),
// and reports whether the file it read is still the one at path once
// read (current); what a file no longer at path held is not to be used.
//
// The one rule that keeps a reader from going back: a reader keeps the
// file it opened, which the next rewrite (rewriteKeepingInodes) makes
// the spare and the one after writes a later state into, whole and
// sealed, before renaming it into place. Read in between, that state is
// one the path has not held yet, and the reader's next read, of the
// file then in place, would go back to an earlier one
// (TestSnapshotNeverReadAhead). A file still at the path once read holds
// only states that have been in place: a file takes a new state only as
// the spare, and the path back only after it is written.
func readSnapshotFile(path string) (data []byte, current bool, err error) {
	f, err := openSnapshot(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	if testHookSnapshotOpened != nil {
		testHookSnapshotOpened()
	}
	read, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	// Read into a buffer of the file's size (and room to find its end),
	// not one doubled its way there: 0.27 MB at 1,000 tasks.
	buf := bytes.NewBuffer(make([]byte, 0, read.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, false, err
	}
	data = buf.Bytes()
	now, err := os.Lstat(path)
	return data, err == nil && os.SameFile(read, now), nil
}

// sealJSON appends to the JSON object obj (compact, ending in '}') its
// CRC-32 (IEEE) as a last key, "crc32", and a newline:
//
//	{"seq":12,...,"crc32":"8f2a01c3"}
//
// A file rewritten in place (rewriteKeepingInodes) can be read while it
// is being rewritten, as a mix of the old and the new or a prefix of the
// new; the checksum tells a whole one from those (openJSON).
func sealJSON(obj []byte) []byte {
	sum := crc32.ChecksumIEEE(obj)
	return fmt.Appendf(obj[:len(obj)-1], `,"crc32":"%08x"}`+"\n", sum)
}

// openJSON returns the object sealJSON sealed, or ok=false if data is not
// such an object whole: read while it was rewritten, changed by hand, or
// written without a seal (by an older crew); a snapshot that is not whole
// is rebuilt from the log. The object is data's own bytes, its seal cut
// off in place: data is not to be used after.
func openJSON(data []byte) (obj []byte, ok bool) {
	const n = len(`,"crc32":"00000000"}` + "\n")
	if len(data) < n || !bytes.HasPrefix(data[len(data)-n:], []byte(`,"crc32":"`)) {
		return nil, false
	}
	sum, err := strconv.ParseUint(string(data[len(data)-n+10:len(data)-3]), 16, 32)
	body := append(data[:len(data)-n], '}')
	return body, err == nil && uint32(sum) == crc32.ChecksumIEEE(body)
}
