// Package events defines crew's events and its append-only event log, the
// source of truth of a run (docs/files.md, events.jsonl).
//
// It also holds, once, the rules of messages that every layer above shares
// (docs/concepts.md): the table of message kinds (KindOf, KindByVerb: who
// sends each kind, its direction, its mailbox file, the task transition it
// makes) and the priorities (Priorities, DefaultPriority).
//
// # On-disk format
//
// events.jsonl holds one JSON event per line, each ending in '\n', with seq
// 1, 2, 3 … in file order and no gaps. Nothing is ever rewritten in place:
// writers only append, under the run lock, and fsync(2) the file before they
// report success. A log is created by writing its first line to a temporary
// file, fsyncing it, renaming it into place and fsyncing the directory, so a
// log file that exists always holds run.created.
//
// # Recovery rules
//
//   - A last line without '\n' was never acknowledged (the writer died before
//     its fsync returned). Readers skip it; the next writer cuts it off under
//     the lock before appending (jsonl.CutTorn).
//   - A failed write or fsync truncates the file back to its size before the
//     operation, so a full disk leaves the log as it was.
//   - A complete line that does not decode, or a seq that is not the previous
//     seq + 1, is damage: readers return a *DamageError naming the file, the
//     line (or byte offset) and the seq, then go on with the next line. Only
//     repair (store/file, repair.go) moves damaged bytes aside, into a quarantine file;
//     nothing is deleted.
package events
