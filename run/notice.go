package run

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/state"
)

// The leader is told of what it did not ask for by messages crew writes
// (events.SenderCrew: kinds failure and timeout), carried by the event
// that makes it happen: the event that fails a task (task.failed, or
// worker.exited for a supervised worker that ended before its task), and
// task.ask_timed_out for a question that timed out without a default
// answer. The state opens such a message for the leader as it opens a
// report (state.State.Apply: an outbox message), so the leader's pending,
// outbox, watch, the mail tree and the board show it until the leader
// acknowledges it (crew ack ID), on every store, without code of their
// own. A log written before notices existed has none: its events read as
// they always did (docs/state-machine.md, Notices to the leader).

// noticeQuote is how much of a reason, or of a question's body, a
// notice quotes, in bytes: the reason of a worker's exit quotes
// reasonTail bytes of its output; a longer --reason is cut (crew task
// show has it whole), so that the event does not carry it twice.
const noticeQuote = 4096

// newNoticeID is the id of a notice, made before its commit (as Send
// makes a message's): the event carries it, so a replay finds the same.
func newNoticeID() (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

// failureNotice is the message that tells the leader of st that task t
// failed with reason: "task t1 failed: REASON" (the reason's first line
// says what happened; a worker's exit quotes the end of its output
// after it). Its priority is high: the run cannot complete until the
// leader acts on it (retries the task, or accepts the failure).
func failureNotice(id string, st *state.State, t *state.Task, reason string) *events.Message {
	body := fmt.Sprintf("task %s failed (no reason given)", t.ID)
	if strings.TrimSpace(reason) != "" {
		body = fmt.Sprintf("task %s failed: %s", t.ID, quote(reason, "crew task show "+t.ID+" has the whole reason"))
	}
	return notice(id, events.KindFailure, events.PriorityHigh, st, t, body)
}

// timeoutNotice is the message that tells the leader of st that task t's
// question q timed out unanswered, without a default answer, and its
// worker went on without one. q's body is quoted when known (nil: only
// its id). Its priority is the default.
func timeoutNotice(id string, st *state.State, t *state.Task, questionID string, q *events.Message) *events.Message {
	body := fmt.Sprintf("question %s of task %s timed out unanswered; its worker went on without an answer", questionID, t.ID)
	if q != nil && q.Body != "" {
		body += ". It asked:\n" + quote(q.Body, "crew events shows the whole question")
	}
	return notice(id, events.KindTimeout, events.DefaultPriority, st, t, body)
}

// notice is a message of one of crew's kinds about task t, from crew to
// the leader of st.
func notice(id, kind, priority string, st *state.State, t *state.Task, body string) *events.Message {
	return &events.Message{ID: id, Kind: kind, Direction: events.Outbox, Task: t.ID, From: state.CrewActor, To: st.Leader,
		Body: body, Priority: priority}
}

// quote is s cut to noticeQuote bytes at most (at a character boundary),
// the cut marked with "…" and where the rest is.
func quote(s, rest string) string {
	if len(s) <= noticeQuote {
		return s
	}
	cut := noticeQuote
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "… (cut: " + rest + ")"
}
