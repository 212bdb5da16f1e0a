// Package file keeps crew's runs and mail tree in a .crew directory: the
// file store (store.Store, store.Log). It owns the write path from the
// run lock to the fsync, and every projection of the log.
//
// Format (docs/files.md). A run is state/runs/<run>/: events.jsonl, the
// append-only log, one JSON event per line, seq 1, 2, 3 … with no gap;
// manifest.json; run.lock; the mailbox files mailbox/{inbox,outbox,
// steering}.jsonl; the snapshots tasks.json and open.jsonl; the
// projection mark projected.json. The mail
// tree is state/mail/<agent>/, one JSON file per message (package
// mailbox).
//
// Write order (log.go, Log.Commit, through the commit engine of
// store/commit). Under the run lock a writer cuts a torn last line
// (never acknowledged), loads the state (a snapshot and the log after
// it), validates its operations, appends their events in one write and
// fsyncs the log: from then on they are committed, and
// only then are the projections written (project.go): mailbox lines,
// mail-tree copies, read flags, the snapshots and the projection mark.
//
// Why it is crash-safe. The log is the only source of truth and is
// fsynced before an operation returns. Every projection is derived from
// it, idempotently, and says how far it got (a mailbox file ends with
// the seq of its last line; tasks.json records the seq and byte offset
// it reflects, and projected.json those of the last event projected,
// both sealed with a CRC so a torn or mixed file is refused): a crash
// after the fsync leaves projections behind, and the next writer, which
// replays the log after the snapshot, catches them up. New files
// (a run, a mail copy sent with crew mail send) are written under a
// hidden name, fsynced, linked or renamed into place, and their
// directory fsynced, so they appear whole or not at all. A damaged log
// is never rewritten in place: Repair moves damaged bytes to a
// quarantine file beside it (repair.go; docs/guarantees.md, 4).
//
// Read path (Log.State, no lock). A reader loads a snapshot (tasks.json
// for the tasks, open.jsonl with the open messages) and replays the log
// after its offset, up to the last complete line. A Log kept by a
// long-lived process (Store.KeepLogs: crew serve, crew mcp) keeps the
// states it returned instead, one per kind, and reads only the bytes
// appended since, dropping a kept state when the log is not the file it
// was read from (kept.go; docs/files.md, Snapshots).
//
// Wake-ups (wake_unix.go; docs/files.md, Wake-ups). A process waiting
// for some participants of a run (ask --wait, await, a follow) holds a
// FIFO linked under wake/<participant>/, and a writer, after its fsync,
// writes a byte to the FIFOs of the participants its events concern
// (state.Concerns): a commit wakes its own waiters only. A writer killed
// between its fsync and its pokes loses them until the next commit,
// whose writer pokes for the events it catches up; the safety net is a
// rescan every 60 s (a stat of events.jsonl, then only the new bytes),
// so a lost wake-up is found within 60 s, and an idle waiter costs one
// wake of its process a minute.
//
// Who does what. A Log's work is split three ways, each part with one
// lock over what it knows and one job: the appender (log.go, lock.go)
// takes the run lock and appends the events of a batch of operations in
// one write and one fsync (group commit, through the commit engine of
// store/commit); the projector (project.go) writes their mailbox lines
// and mail copies; the snapshotter (snapshot.go) writes tasks.json and
// open.jsonl. The appender also has a turn, held through a commit batch
// or a repair, so that one goroutine of the process writes the log at a
// time; a batch hands its projection job to the projector before it
// gives the turn back, so that a repair, which waits for the projector,
// finds it there. Where locks are held at once they are taken in this
// order: the appender's turn, the snapshotter's lock, the appender's,
// the projector's.
//
// The lock epoch. While a process holds the run lock without letting go,
// no other process writes the run's files, so what it wrote itself is
// still what they hold: each part keeps what it knows of its files (the
// appender the open log and the state as of its last commit, the
// projector where each mailbox file ends and the mail directories it has
// open, the snapshotter the seq of tasks.json and the state it owes it)
// and trusts it. The epoch ends when the lock is let go (another process
// may write meanwhile), and also when it is kept only for the snapshots
// of operations that have returned (a person or a test may still change
// the files by hand). Then what it knows is checked before it is
// trusted again: events.jsonl, tasks.json and each mailbox file against
// what this process left (the same file, size, modification and change
// times: one lstat(2) each, sameVersion), each mail directory against
// the one held open
// (AgentDir.Moved), the mailbox directory to be a real directory, not a
// link to one. What changed is read or opened again: every write moves a
// file's change time, so another process's writes and changes by hand
// are seen (where the system gives no change time, a change by hand that
// keeps a file's size and modification time is not). A failed write, and
// a repair, forget what they touched.
//
// Snapshots across epochs. tasks.json is written every 128 events
// (snapshotEvery) of a process, not at every let-go of the lock: while it
// is still the file this process wrote, or read under the lock, the
// snapshotter trusts its seq across epochs and keeps the state it owes
// it, which it settles, taking the lock again, once it has committed
// nothing for 10 ms (snapshotIdle), and at Sync and Store.Close:
// tasks.json when it is due (tasksDue: behind by 1 + tasks/32 events),
// else only the projection mark, projected.json (snapshot.go, mark). So
// a process that commits once per epoch, back to back (crew serve, one
// MCP call or HTTP hook at a time), does not rewrite it each time, and a
// crew command on a run of 1,000 tasks does not rewrite them all on its
// way out; a process's first commit writes it at once when its seq is
// unknown. Meanwhile readers replay up to 127 events after it, and a
// writer of another process projects again only the events after the
// mark (every projection is idempotent). Crash safety is unchanged:
// tasks.json and the mark are only ever caches of the log, which
// matchesLog and endsAt check, and crew repair removes the mark.
package file

import "github.com/crew-dev/crew/store"

var (
	_ store.Store    = (*Store)(nil)
	_ store.Log      = (*Log)(nil)
	_ store.Repairer = (*Store)(nil)
)
