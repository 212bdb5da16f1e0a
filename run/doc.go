// Package run holds crew's operations on a run, written once for every
// store: create and open runs (Root), add tasks and move them through the
// state machine (AddTask, Transition, Complete with its done-when check),
// send messages (Send: steer, follow-up, nudge, report, respond,
// broadcast; Ask, Await, AskTimedOut), read them (Inbox, EachInbox,
// Pending, Events, Watch), close them (Acknowledge, MarkDelivered), record
// a supervised worker's start and exit (WorkerStarted, WorkerExited),
// nudge quiet tasks (NudgeQuiet) and mail outside runs (SendMail,
// ReadMail). The events that fail a task or time a question out without
// a default carry crew's message to the leader (kinds failure and
// timeout, notice.go), open until the leader acknowledges it.
//
// Each operation is a validation written as a function of the run's
// state (package state), handed to store.Log.Commit, which appends the
// event it returns durably before the operation returns. The package
// knows nothing of files or NATS: a Root is made on a store once (Init
// and Find on the file system, NewRoot on any store.Store), and every
// Run it opens goes through that store's Log. The rules of what an
// operation may do in which state are docs/state-machine.md's; the
// errors returned wrap the sentinels of package crew (docs/cli.md, Exit
// codes).
//
// Supervision is not here: the worker processes, reaping, heartbeats,
// worker logs and waiting for a run are package supervise's, which
// imports run, never the reverse. Run keeps the parts that read nothing
// but the state: the liveness words and rule (LivenessOf, Underway,
// LastSignOfLife), the check that a worker may start (Spawnable), the
// outcome of a wait (Ended), and where a run's workers keep their files
// on this machine (Run.WorkersDir, with the root's modes, Root.Perm).
package run
