// Package state owns the reducer: the one place where the rules that turn
// a run's log into its current state live. A State is folded from the
// log's events, oldest first, by Apply, which also returns the effects an
// event has on the per-agent mail tree (copies to deliver, copies seen).
// Stores write projections from those effects; reports and readers use
// the same rules (MessageUpdates, Recipients, Key) instead of restating
// them.
//
// The rules, in short (docs/state-machine.md has the whole table):
//
//   - task.* events move a task from their From state to their To state;
//     the task state machine itself is package task.
//   - a message is open from its message.sent (or task.waiting,
//     task.responded) event until it is acknowledged or rejected; it is
//     pending until its recipient reads it (message.delivered). Crew's
//     notices to the leader (kinds failure and timeout) are messages too,
//     carried by the event that fails a task (task.failed, worker.exited)
//     or times a question out: open for the leader like a report; an
//     event without one (a log written before them) opens nothing.
//   - a task's open question closes when the task leaves waiting: it is
//     answered, timed out or moot.
//   - a broadcast has one copy per recipient task, keyed id@task (Key).
//
// The package does no I/O and imports only events and task.
package state
