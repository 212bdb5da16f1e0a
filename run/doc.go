// Package run holds crew's operations on a run, written once for every
// store: create and open runs (Root), add tasks and move them through the
// state machine (AddTask, Transition, Complete with its done-when check),
// send messages (Send: steer, follow-up, nudge, report, respond,
// broadcast; Ask, Await, AskTimedOut), read them (Inbox, EachInbox,
// Pending, Events, Watch), close them (Acknowledge, MarkDelivered), wait
// for a run (WaitRun) and mail outside runs (SendMail, ReadMail).
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
package run
