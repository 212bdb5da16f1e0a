// Package mailbox stores crew's messages outside the event log, in two
// forms. Both are projections of a run's events.jsonl (docs/files.md) or, for
// crew mail send, plain mail; neither is a second source of truth.
//
// # JSONL mailbox files
//
// A run's .crew/state/runs/<run>/mailbox/ holds inbox.jsonl, outbox.jsonl and
// steering.jsonl: the run's messages of each direction, one JSON object per
// line in seq order, appended under the run lock and read from a seq cursor
// (Append, Read, LastSeq).
//
// # Per-agent mail tree
//
// .crew/state/mail/ (a Tree) holds one directory per agent, compatible with
// the mail-async format (docs/mail-tree.md):
//
//	mail/<agent>/<stamp>-<from>-<id>.json   one message per file (Name)
//	mail/<agent>/archive/                   messages moved by Archive
//	mail/<agent>/.tmp-<uuid>                a delivery in progress (hidden)
//
// <stamp> is the UTC send time with colons replaced by dashes and
// milliseconds kept (2026-03-05T10-30-00.123Z), so names sort by time. A
// file holds one compact JSON object with sorted keys (Mail, Marshal):
// from, to, type, subject, body, timestamp, read and priority (one of
// events.Priorities, events.DefaultPriority when none is given), and for
// the copy of a run message also id, run, task and kind; keys crew does
// not know are kept.
//
// Delivery (Tree.Deliver) is Maildir's (https://cr.yp.to/proto/maildir.html)
// in one directory: write a hidden, uniquely named temp file, fsync(2) it,
// link(2) it to its final name (never overwriting), fsync(2) the directory.
// A reader therefore sees a message whole or not at all. A projection's
// copy is not fsynced (the log is): a power cut can leave its name with
// no data, which Find and List report as damaged and delivering the
// message again replaces (the name carries the id). Readers (List,
// Find) skip hidden files and report, without stopping, files they cannot
// parse — trees written by other mail-async tools have names without
// milliseconds, pretty-printed JSON, torn files and leftover temp files.
// The read flag is changed by an atomic rewrite (SetRead) and messages are
// archived by link and unlink (Archive), which never overwrites. No write
// follows a symbolic link: agent and archive directories that are links
// are refused, and every file operation is confined to the agent's
// directory (docs/files.md, Permissions).
//
// A Store other than Tree (store/nats keeps the tree in a key-value
// bucket) keeps these rules by calling the functions that state them,
// not a copy: File (the name and content of a delivery, with its checks
// and defaults), HoldsMessage (a delivery already made), WithRead (the
// read flag), IsFileName and NameHasID (finding a message), ParseEntry
// and SortEntries (reading a mailbox), Mail.Archivable (what Archive
// moves), and the errors NoMailbox and NoMessage.
//
// # Files of the package
//
// mail.go is the mail file format; name.go the names of its files and the
// entries readers return; tree.go the tree (its agents' directories,
// delivery, read flags), agentdir.go one agent's directory held open,
// list.go reading, archive.go the archive, fs.go the file-system steps;
// jsonl.go the JSONL mailbox files; project.go the projection of a run's
// events onto the tree.
package mailbox
