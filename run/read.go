package run

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
	"github.com/crew-dev/crew/task"
)

// Leader is the participant name readers use for the leader's view
// (state.Leader).
const Leader = state.Leader

// InboxOptions select what a reader sees.
type InboxOptions struct {
	Since  int64 // only messages with seq > Since
	Unread bool  // only messages not yet delivered
	Peek   bool  // do not mark anything delivered
	// Via is how the reader shows the messages it marks delivered
	// (events.Event.Via): "" is events.ViaInbox.
	Via string
}

// Inbox returns the open messages (not acknowledged or rejected) of a
// participant, oldest first: for a task, what the leader sent it (inbox
// and steering) and broadcasts; for Leader, what workers sent (outbox).
// Reading marks pending messages delivered (one message.delivered event)
// unless Peek; the messages returned show their status after that. A
// damaged log is reported with crew.ErrDamaged after what could be read;
// a failure to mark them delivered is a *DeliverError, and nothing is
// returned.
func (r *Run) Inbox(ctx context.Context, participant string, o InboxOptions) ([]events.Message, error) {
	var msgs []events.Message
	err := r.EachInbox(ctx, participant, o, func(m *events.Message) error {
		msgs = append(msgs, *m)
		return nil
	})
	if err != nil && !errors.Is(err, crew.ErrDamaged) {
		return nil, err
	}
	return msgs, err
}

// EachInbox is Inbox, calling fn with each message in turn instead of
// returning them all: its memory does not grow with the messages' bodies,
// so a reader can stream any number of them. It marks what it will show
// delivered first, then calls fn; an error from fn stops it and is
// returned.
func (r *Run) EachInbox(ctx context.Context, participant string, o InboxOptions, fn func(*events.Message) error) error {
	st, err := r.stateFor(participant)
	if err != nil {
		return err
	}
	if participant != Leader {
		if _, err := r.taskIn(st, participant); err != nil {
			return err
		}
	}
	var (
		list []*state.Open
		ids  []string
	)
	for _, op := range st.OpenFor(participant) {
		if op.Seq > o.Since && (!o.Unread || op.Status == events.StatusPending) {
			list = append(list, op)
			if op.Status == events.StatusPending {
				ids = append(ids, op.ID)
			}
		}
	}
	damage := st.Err()
	if len(ids) > 0 && !o.Peek {
		// The entries of list are st's: the commit brings st up to date
		// and applies the message.delivered event to it, so they show
		// their status after it.
		via := o.Via
		if via == "" {
			via = events.ViaInbox
		}
		_, err := r.markDelivered(ctx, participant, ids, via, st)
		if errors.Is(err, crew.ErrDamaged) {
			// Writers refuse a log whose last line is damaged until it is
			// repaired; still show what could be read (as not delivered).
			damage = err
		} else if err != nil {
			return &DeliverError{Run: r.ID(), Messages: len(ids), Err: err}
		}
	}
	st = nil // let the open messages of others go
	if err := r.log.Bodies(ctx, list, fn); err != nil {
		return err
	}
	return damage
}

// DeliverError is the error of EachInbox (and Inbox) when it could not
// record that the messages were read (message.delivered): most often a
// state root that cannot be written (read-only, another user's). Reading
// with InboxOptions.Peek writes nothing. Err, which it wraps, says why.
type DeliverError struct {
	Run      string
	Messages int // how many were to be marked
	Err      error
}

func (e *DeliverError) Error() string {
	return fmt.Sprintf("cannot mark %s delivered in run %s: %v", human.Count(e.Messages, "message"), e.Run, e.Err)
}

func (e *DeliverError) Unwrap() error { return e.Err }

// MarkDelivered records that participant (a task id, or Leader) has seen
// the messages: those of ids still pending for it go to delivered, in one
// message.delivered event, which it returns (nil when none was pending).
func (r *Run) MarkDelivered(ctx context.Context, participant string, ids []string) (*events.Event, error) {
	return r.markDelivered(ctx, participant, ids, "", nil)
}

// MarkDeliveredVia is MarkDelivered recording how the messages reached
// the participant (events.Event.Via: events.ViaHook and its moment,
// events.ViaWake, ...).
func (r *Run) MarkDeliveredVia(ctx context.Context, participant string, ids []string, via string) (*events.Event, error) {
	return r.markDelivered(ctx, participant, ids, via, nil)
}

// markDelivered is MarkDelivered. With seen, a state that tracks the
// participant's open messages (stateFor), it checks the ids against that
// state brought up to date under the run lock, instead of loading every
// open message of the run.
func (r *Run) markDelivered(ctx context.Context, participant string, ids []string, via string, seen *state.State) (*events.Event, error) {
	if seen == nil {
		seen = state.New() // every open message: the store loads them
	}
	return r.log.Commit(ctx, store.Change{State: seen, Validate: func(st *state.State) (*events.Event, error) {
		still := make([]string, 0, len(ids)) // one slice, not a doubling one: ids may be 100,000
		for _, id := range ids {
			op, _ := st.Lookup(id, participant)
			if op != nil && op.Status == events.StatusPending && op.Task == state.RecipientKey(participant) {
				still = append(still, id)
			}
		}
		if len(still) == 0 {
			return nil, nil
		}
		return &events.Event{Type: events.MessageDelivered, Task: state.RecipientKey(participant), Actor: participant, MessageIDs: still, Via: via}, nil
	}})
}

// Acknowledge marks messages addressed to participant as acknowledged (or,
// with reject, rejected with reason) in one event. An id that is not an
// open message of the participant is crew.ErrNotFound; acknowledging a
// message already acknowledged is a no-op; rejecting a closed one is
// crew.ErrConflict, and so is acknowledging or rejecting a question a task
// still waits on (only a response closes it).
func (r *Run) Acknowledge(ctx context.Context, participant string, ids []string, reject bool, reason string) error {
	if len(ids) == 0 {
		return fmt.Errorf("no message id given: %w", crew.ErrInvalid)
	}
	if !utf8.ValidString(reason) {
		return fmt.Errorf("reason is not valid UTF-8; crew refuses to alter it: %w", crew.ErrInvalid)
	}
	for _, id := range ids {
		if _, err := uuidCheck(id); err != nil {
			return err
		}
	}
	// An id given twice is named once in the event.
	seen := make(map[string]bool, len(ids))
	ids = slices.DeleteFunc(slices.Clone(ids), func(id string) bool {
		dup := seen[id]
		seen[id] = true
		return dup
	})
	typ := events.MessageAcknowledged
	if reject {
		typ = events.MessageRejected
	}
	var missing []string
	_, err := r.commitOpen(ctx, func(st *state.State) (*events.Event, error) {
		missing = nil
		var mine []string
		for _, id := range ids {
			op, _ := st.Lookup(id, participant)
			switch {
			case op == nil:
				missing = append(missing, id)
			case op.Task != state.RecipientKey(participant):
				return nil, notAddressed(id, state.Participant(op.Task), participant, reject)
			case op.Kind == events.KindQuestion:
				// An open question is one a task waits on (it closes when the
				// task leaves waiting). Only respond may close it: ack or
				// reject would leave the worker blocked and the question
				// out of the leader's pending list.
				for _, t := range st.Tasks {
					if t.Question == id {
						return nil, fmt.Errorf("question %s is what task %s waits on; answer it with crew respond %s: %w", id, t.ID, t.ID, crew.ErrConflict)
					}
				}
				mine = append(mine, id)
			default:
				mine = append(mine, id)
			}
		}
		if len(missing) > 0 || len(mine) == 0 {
			return nil, nil
		}
		return &events.Event{Type: typ, Task: state.RecipientKey(participant), Actor: participant, MessageIDs: mine, Reason: reason}, nil
	})
	if err != nil {
		return err
	}
	if len(missing) == 0 {
		return nil
	}
	for _, id := range missing {
		if err := r.notOpen(id, participant, reject); err != nil {
			return err
		}
	}
	if len(missing) < len(ids) {
		// Some were open: acknowledge those, now that the closed ones are known harmless.
		var rest []string
		skip := map[string]bool{}
		for _, id := range missing {
			skip[id] = true
		}
		for _, id := range ids {
			if !skip[id] {
				rest = append(rest, id)
			}
		}
		return r.Acknowledge(ctx, participant, rest, reject, reason)
	}
	return nil
}

// notOpen tells why message id, which is not open for participant, cannot
// be acknowledged (or, with reject, rejected): unknown (crew.ErrNotFound),
// another participant's, or already closed (crew.ErrConflict). It
// returns nil for acknowledging a message already acknowledged.
func (r *Run) notOpen(id, participant string, reject bool) error {
	status, to, err := r.closedStatus(id, participant)
	if err != nil {
		return err
	}
	if status == "" {
		return fmt.Errorf("no message %s in run %s: %w", id, r.ID(), crew.ErrNotFound)
	}
	if to != participant {
		// Closed or not, only its recipient may acknowledge a message.
		if to == "" {
			return fmt.Errorf("message %s is a broadcast that did not go to %s: %w", id, participant, crew.ErrConflict)
		}
		return notAddressed(id, to, participant, reject)
	}
	if reject || status != events.StatusAcknowledged {
		return fmt.Errorf("message %s is already %s: %w", id, status, crew.ErrConflict)
	}
	return nil
}

// notAddressed is the error of participant acknowledging (or, with
// reject, rejecting) message id addressed to another, to:
// crew.ErrConflict. When the leader was taken for the reader though the
// message is a task's (a worker's shell without CREW_TASK), it says how
// to act as that task's worker.
func notAddressed(id, to, participant string, reject bool) error {
	if participant == Leader && to != Leader && to != "" {
		verb := "ack"
		if reject {
			verb = "reject"
		}
		return fmt.Errorf("message %s is addressed to %s, not %s; as %s's worker: crew %s --task %s %s (or set CREW_TASK=%s): %w", id, to, participant, to, verb, to, id, to, crew.ErrConflict)
	}
	return fmt.Errorf("message %s is addressed to %s, not %s: %w", id, to, participant, crew.ErrConflict)
}

func uuidCheck(id string) (string, error) {
	if len(id) != 36 || strings.Count(id, "-") != 4 {
		return "", fmt.Errorf("invalid message id %q: message ids are UUIDs like 0193a1c2-7b1e-7c3d-9e2f-0a1b2c3d4e5f: %w", id, crew.ErrInvalid)
	}
	return id, nil
}

// closedStatus scans the log for a message that is no longer open for
// participant (a task id, or Leader). It returns the message's final status
// for that participant ("acknowledged" or "rejected"; "" if the run never
// had such a message) and the participant it was addressed to: Leader for
// what workers send, the task for the rest, and for a broadcast participant
// itself if it was among the recipients, else "". It reads the whole log:
// it serves only error paths.
func (r *Run) closedStatus(id, participant string) (status, to string, err error) {
	broadcast := false
	err = r.scan(0, func(e *events.Event) error {
		if m := e.Message; m != nil && m.ID == id {
			status = events.StatusPending
			switch {
			case m.Direction == events.Outbox:
				to = Leader
			case m.To == events.Broadcast:
				broadcast = true
				if slices.Contains(state.Recipients(e), participant) {
					to = participant
				}
			default:
				to = m.To
			}
		}
		if status == "" {
			return nil
		}
		for _, u := range state.MessageUpdates(e) {
			if u.ID != id || u.Status == events.StatusDelivered {
				continue
			}
			if broadcast && u.Task != state.RecipientKey(participant) {
				continue // each recipient of a broadcast closes its own copy
			}
			status = u.Status
		}
		return nil
	})
	return status, to, err
}

// Pending is what is open for a participant (docs/reading.md, Pending).
type Pending struct {
	// Messages are the participant's open messages, most urgent first,
	// then oldest first. For the leader: the workers' questions (each the
	// open question of a waiting task), the reports not yet acknowledged
	// and crew's failure and timeout messages (notice.go); for a task:
	// its messages not yet acknowledged.
	Messages []events.Message `json:"messages,omitempty"`
	// Task is the participant's task in the same state (nil for the
	// leader): a caller that needs both reads the run once.
	Task *state.Task `json:"-"`
}

// Pending computes what is open for participant (Leader or a task id) by
// reducing the log. If the log has a gap or an unreadable line it returns
// what it could read and an error wrapping crew.ErrDamaged: it never says
// "nothing open" when it could not read everything. It records nothing
// (at most it rebuilds a damaged mailbox projection from the log).
func (r *Run) Pending(participant string) (*Pending, error) { return r.PendingIn(nil, participant) }

// PendingIn is Pending computed from st, a state of the run the caller
// has read that tracks participant's open messages (State tracks every
// participant's: a caller that needs what is open for several reads the
// run once, not once for each). With st nil, or one that does not track
// them, it reads the run as Pending does.
func (r *Run) PendingIn(st *state.State, participant string) (*Pending, error) {
	if st == nil || !st.Tracks(state.RecipientKey(participant)) {
		var err error
		if st, err = r.stateFor(participant); err != nil {
			return nil, err
		}
	}
	var err error
	p := &Pending{}
	if participant != Leader {
		if p.Task, err = r.taskIn(st, participant); err != nil {
			return nil, err
		}
	}
	list := st.OpenFor(participant)
	sort.SliceStable(list, func(i, j int) bool {
		return events.PriorityRank(list[i].Priority) > events.PriorityRank(list[j].Priority)
	})
	if p.Messages, err = r.bodies(list); err != nil {
		return nil, err
	}
	return p, st.Err()
}

// answer scans the log after seq since for the outcome of a question: the
// response (returned; defaultAnswer when it was answered by default), a
// timeout or a terminal task (crew.ErrConflict). It
// returns nil, nil when the question is still open.
func (r *Run) answer(questionID, taskID string, since int64) (*events.Message, error) {
	var answer *events.Message
	err := r.scan(since, func(e *events.Event) error {
		if e.Type == events.TaskResponded && e.Message != nil && e.Message.ReplyTo == questionID {
			m := *e.Message
			answer = &m
			return events.ErrStopScan
		}
		if e.Task == taskID && e.From == string(task.Waiting) && task.State(e.To).Terminal() {
			return fmt.Errorf("question %s will not be answered: task %s is %s: %w", questionID, taskID, e.To, crew.ErrConflict)
		}
		if e.Type == events.TaskAskTimedOut && slices.Contains(e.MessageIDs, questionID) {
			if def := state.DefaultOf(e); def != nil {
				answer = defaultAnswer(e, questionID, *def)
				return events.ErrStopScan
			}
			return fmt.Errorf("question %s timed out unanswered at %s: %w", questionID, e.At, crew.ErrTimeout)
		}
		return nil
	})
	return answer, err
}
