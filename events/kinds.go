package events

import "github.com/crew-dev/crew/task"

// Message kinds (docs/concepts.md, Message kinds); KindOf gives the rules
// of each.
const (
	KindQuestion = "question"
	KindResponse = "response"
	KindSteer    = "steer"
	KindFollowUp = "follow-up"
	KindNudge    = "nudge"
	KindReport   = "report"
	KindMessage  = "message" // a broadcast
	// KindFailure tells the leader a task failed: crew writes it into the
	// event that fails the task (task.failed, or worker.exited when a
	// supervised worker ends before its task), never an agent.
	KindFailure = "failure"
	// KindTimeout tells the leader a question timed out unanswered, with
	// no default answer, and its worker went on without one: crew writes
	// it into that task.ask_timed_out.
	KindTimeout = "timeout"
)

// Directions: inbox is leader -> worker, outbox is worker -> leader. They
// are also the names of two of a run's mailbox files (inbox.jsonl,
// outbox.jsonl); Steering is the third.
const (
	Inbox  = "inbox"
	Outbox = "outbox"
)

// Steering names the mailbox file steering.jsonl, which holds the
// leader's steers apart from the rest of the inbox (docs/files.md,
// Mailbox files).
const Steering = "steering"

// Who may send a message of a kind (KindInfo.Sender).
const (
	SenderLeader = "leader" // the run's leader
	SenderWorker = "worker" // the worker of the message's task
	// SenderCrew: no agent sends it; crew writes it into the event of
	// what it tells (its Event), from state.CrewActor to the leader.
	// run.Run.Send refuses it.
	SenderCrew = "crew"
)

// Broadcast is the `to` of a message sent to every non-terminal task.
const Broadcast = "*"

// KindInfo is the rules of one message kind, written once for the
// operations (run.Send), the state, the mailbox projection, the front
// ends and the reports (docs/concepts.md, Message kinds):
//
//	kind       verb       sender  direction  file      task transition
//	question   ask        worker  outbox     outbox    running -> waiting (task.Ask, task.waiting)
//	response   respond    leader  inbox      inbox     waiting -> running (task.Respond, task.responded)
//	steer      steer      leader  inbox      steering  none
//	follow-up  follow-up  leader  inbox      inbox     none
//	nudge      nudge      leader  inbox      inbox     none
//	report     report     worker  outbox     outbox    none
//	message    broadcast  leader  inbox      inbox     none; to every task not yet ended
//	failure    -          crew    outbox     outbox    -> failed (task.Fail: task.failed, or worker.exited)
//	timeout    -          crew    outbox     outbox    waiting -> running (task.AskTimeout, task.ask_timed_out without a default)
//
// A kind without a transition is refused for a task that has ended. The
// kinds crew sends (failure, timeout) have no verb: they are written into
// the event that fails the task or times the question out, so the leader
// has them open (crew pending, outbox, watch) until it acknowledges them.
type KindInfo struct {
	Kind      string  // the kind, as a message carries it
	Verb      string  // the operation that sends it: the crew command, the app method, the web action; "" for SenderCrew
	Sender    string  // who may send it: SenderLeader, SenderWorker, or SenderCrew (no one: crew writes it)
	Direction string  // Outbox (worker -> leader) or Inbox (leader -> worker)
	File      string  // the mailbox file it is projected into, without ".jsonl": Inbox, Outbox or Steering
	Op        task.Op // the transition it makes its task: task.Ask, task.Respond, or "" for none
	Event     string  // the type of the event that sends it: TaskWaiting, TaskResponded, MessageSent, TaskFailed (or WorkerExited) or TaskAskTimedOut
	Broadcast bool    // it goes to every task not yet ended (its task and `to` are Broadcast)
}

// kinds is the table of KindInfo, in the order of Kinds.
var kinds = [...]KindInfo{
	{Kind: KindQuestion, Verb: "ask", Sender: SenderWorker, Direction: Outbox, File: Outbox, Op: task.Ask, Event: TaskWaiting},
	{Kind: KindResponse, Verb: "respond", Sender: SenderLeader, Direction: Inbox, File: Inbox, Op: task.Respond, Event: TaskResponded},
	{Kind: KindSteer, Verb: "steer", Sender: SenderLeader, Direction: Inbox, File: Steering, Event: MessageSent},
	{Kind: KindFollowUp, Verb: "follow-up", Sender: SenderLeader, Direction: Inbox, File: Inbox, Event: MessageSent},
	{Kind: KindNudge, Verb: "nudge", Sender: SenderLeader, Direction: Inbox, File: Inbox, Event: MessageSent},
	{Kind: KindReport, Verb: "report", Sender: SenderWorker, Direction: Outbox, File: Outbox, Event: MessageSent},
	{Kind: KindMessage, Verb: "broadcast", Sender: SenderLeader, Direction: Inbox, File: Inbox, Event: MessageSent, Broadcast: true},
	{Kind: KindFailure, Sender: SenderCrew, Direction: Outbox, File: Outbox, Op: task.Fail, Event: TaskFailed},
	{Kind: KindTimeout, Sender: SenderCrew, Direction: Outbox, File: Outbox, Op: task.AskTimeout, Event: TaskAskTimedOut},
}

// Kinds lists every message kind, in the order of the table (and of
// reports). Do not modify it.
var Kinds = []string{KindQuestion, KindResponse, KindSteer, KindFollowUp, KindNudge, KindReport, KindMessage, KindFailure, KindTimeout}

// KindOf returns the rules of kind, and false for a kind that is not one
// of Kinds.
func KindOf(kind string) (KindInfo, bool) {
	for i := range kinds {
		if kinds[i].Kind == kind {
			return kinds[i], true
		}
	}
	return KindInfo{}, false
}

// KindByVerb returns the rules of the kind that the operation verb sends
// ("ask", "respond", "steer", "follow-up", "nudge", "report",
// "broadcast"), and false for any other verb ("" too: the kinds crew
// sends have none).
func KindByVerb(verb string) (KindInfo, bool) {
	if verb == "" {
		return KindInfo{}, false
	}
	for i := range kinds {
		if kinds[i].Verb == verb {
			return kinds[i], true
		}
	}
	return KindInfo{}, false
}
