// Package file keeps crew's runs and mail tree in a .crew directory: the
// file store (store.Store, store.Log). It owns the write path from the
// run lock to the fsync, and every projection of the log.
//
// Format (docs/files.md). A run is state/runs/<run>/: events.jsonl, the
// append-only log, one JSON event per line, seq 1, 2, 3 … with no gap;
// manifest.json; run.lock; the mailbox files mailbox/{inbox,outbox,
// steering}.jsonl; the snapshots tasks.json and open.jsonl. The mail
// tree is state/mail/<agent>/, one JSON file per message (package
// mailbox).
//
// Write order (log.go, Log.Commit, through the commit engine of
// store/commit). Under the run lock a writer cuts a torn last line
// (never acknowledged), loads the state (a snapshot and the log after
// it), validates its operations, appends their events in one write and
// fsyncs the log: from then on they are committed, and
// only then are the projections written (project.go): mailbox lines,
// mail-tree copies, read flags and the snapshots.
//
// Why it is crash-safe. The log is the only source of truth and is
// fsynced before an operation returns. Every projection is derived from
// it, idempotently, and says how far it got (a mailbox file ends with
// the seq of its last line; tasks.json records the seq and byte offset
// it reflects, sealed with a CRC so a torn or mixed file is refused): a
// crash after the fsync leaves projections behind, and the next writer,
// which replays the log after the snapshot, catches them up. New files
// (a run, a mail copy sent with crew mail send) are written under a
// hidden name, fsynced, linked or renamed into place, and their
// directory fsynced, so they appear whole or not at all. A damaged log
// is never rewritten in place: Repair moves damaged bytes to a
// quarantine file beside it (repair.go; docs/guarantees.md, 4).
package file

import "github.com/crew-dev/crew/store"

var (
	_ store.Store    = (*Store)(nil)
	_ store.Log      = (*Log)(nil)
	_ store.Repairer = (*Store)(nil)
)
