// Package store is the narrow interface between crew's operations
// (package run) and where a state root lives: a Store holds runs and the
// per-agent mail tree; a Log is one run's append-only event log with the
// state reduced from it. The operations, the reducer (package state) and
// the task state machine are written once, on top of these interfaces;
// a store only keeps events in order and projects them.
//
// Two implementations exist: store/file (a .crew directory: group commit
// under a file lock, snapshots, mailbox files, a Maildir-style mail
// tree) and store/nats (NATS JetStream: a stream per run, a key-value
// bucket for the mail tree). Both pass store/storetest, the conformance
// suite of this interface a third store would run too (as
// hashicorp/raft's LogStore tests do for its stores), and run/runtest,
// the suite of the operations on a root of the store.
package store
