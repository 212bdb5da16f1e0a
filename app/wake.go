package app

import (
	"context"
	"errors"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/supervise"
)

// AtWake is the moment an idle agent is woken (Wake): not one of its
// loop's, which Deliver answers, but a background wait the agent started
// (Claude Code's asyncRewake hook, crew hook claude wait).
const AtWake Moment = "wake"

// AnswerGrace is how long Wake leaves a response to a worker's question
// to the ask or await that may be waiting for it (crew ask --wait,
// crew_ask with wait, crew await), which shows it and acknowledges it at
// once: only a response still not taken after it wakes the agent, so
// that an agent blocked in ask is not shown its answer twice.
const AnswerGrace = time.Second

// Wake is the request of Wake: the wait of an idle agent for its mail.
type Wake struct {
	Run   string    `json:"run,omitempty" jsonschema:"the run id (default: the identity's, else the most recently created run)"`
	Task  string    `json:"-"` // the worker's task (default: the identity's; none: the leader's wait, or nothing)
	Tools ToolNames `json:"-"` // how the agent names crew's MCP tools (Deliver.Tools)
}

// Wake blocks until the agent has something new and returns it, as
// Deliver would at a tool result: for a worker, a message from the
// leader not delivered before (steer, follow-up, nudge, broadcast, and a
// response no ask took within AnswerGrace); for the run's leader (no
// task, the identity's agent the leader's name, as Deliver decides),
// what crew pending lists that it was not shown before (workers'
// questions, reports, failure and timeout notices). What it returns is
// marked delivered by it, so no moment shows it again, and a message
// another moment marked first does not wake it. It never wakes for the
// agent's own messages: they are not in its open list.
//
// It returns a Delivery without Text when there is nothing to wait for:
// the worker's task ended, every task of the leader's run ended, or the
// agent is no crew agent. It waits on the run's log as ask --wait does
// (run.Run.Watch with the participant: woken only by what concerns it),
// reading the agent's open messages once per wake-up.
// show, when not nil, is given the delivery as soon as it is recorded
// (its event durable), before the mailbox projections of that record are
// written: the wait hook wakes the agent then (as ask --wait shows its
// answer before it acknowledges it). An error from show is returned.
// Errors: those of Deliver opening the run and the task, ctx.Err() when
// ctx ends.
func (a *App) Wake(ctx context.Context, req Wake, show func(*Delivery) error) (*Delivery, error) {
	d := &Delivery{Moment: AtWake}
	participant := req.Task
	if participant == "" {
		participant = a.Identity.Task
	}
	var r *run.Run
	var err error
	if participant == "" {
		if a.Identity.As == "" {
			return d, nil // not a crew agent
		}
		if r, err = a.Run(req.Run); err != nil {
			return nil, err
		}
		if !crew.SameID(a.Identity.As, r.Manifest.Leader) {
			return d, nil
		}
		participant = run.Leader
	} else {
		if participant, err = a.task(participant); err != nil {
			return nil, err
		}
		if r, err = a.Run(req.Run); err != nil {
			return nil, err
		}
	}
	w := &delivery{ctx: ctx, r: r, task: participant, req: Deliver{Run: req.Run, Moment: AtWake, Tools: req.Tools}, d: d}
	// Known while it waits: a message not delivered for long has a
	// likelier reason than an idle agent without a wait hook
	// (Undelivered).
	if release, err := supervise.Waiting(r, participant); err == nil {
		defer release()
	}
	// Before the first read: a change after it wakes the wait. Only the
	// commits that concern the participant wake it (state.Concerns: the
	// messages to its task and the task's end; for the leader, what is
	// sent to it and every task's change), not every commit of the run.
	watch := r.Watch(participant)
	defer watch.Close()
	// The delivery's record returns once durable; its projections are
	// written after show, before Wake returns.
	r.SetAsync(true)
	defer func() {
		r.Sync()
		r.SetAsync(false)
	}()
	for {
		hold, done, err := w.wake()
		if err == nil && d.Text != "" && show != nil {
			err = show(d)
		}
		if err != nil || done || d.Text != "" {
			return d, err
		}
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if hold > 0 {
			wctx, cancel = context.WithTimeout(ctx, hold)
		}
		err = watch.Wait(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil && !errors.Is(err, context.DeadlineExceeded): // not the hold's end: the watch failed
			return nil, err
		}
	}
}

// wake is one look of Wake at the agent's open messages: it delivers
// what is new (d.Text), or says that there is nothing to wait for
// (done), or how long to wait at most (hold, 0 for until the log grows)
// because a response is still left to a waiting ask.
func (w *delivery) wake() (hold time.Duration, done bool, err error) {
	t, msgs, err := w.open()
	if err != nil {
		return 0, false, err
	}
	if w.task == run.Leader {
		st, err := w.r.TaskState()
		if err != nil {
			return 0, false, err
		}
		if len(pendingOnly(msgs)) == 0 && allEnded(st) {
			return 0, true, nil
		}
	} else if t.Status.Terminal() {
		return 0, true, nil
	}
	// In the middle of a turn (a person's prompt began it, no stop ended
	// it: run.Run.InTurn), follow-ups wait for the turn's stop, which
	// shows them: the wait hook, re-armed by the turn's prompt, would
	// else show them at once.
	inTurn := false
	if w.task != run.Leader {
		if inTurn, err = w.r.InTurn(w.task); err != nil {
			return 0, false, err
		}
	}
	var fresh []events.Message
	for _, m := range pendingOnly(msgs) {
		if inTurn && m.Kind == events.KindFollowUp {
			continue
		}
		if m.Kind == events.KindResponse && w.task != run.Leader {
			if left := AnswerGrace - time.Since(m.SentAt.Time); left > 0 {
				if hold == 0 || left < hold {
					hold = left
				}
				continue
			}
		}
		fresh = append(fresh, m)
	}
	if len(fresh) == 0 {
		return hold, false, nil
	}
	if fresh, err = w.markDelivered(fresh); err != nil || len(fresh) == 0 {
		return hold, false, err
	}
	w.d.Text = w.freshText(fresh)
	return 0, false, nil
}

// allEnded reports whether the run has tasks and every one has ended.
func allEnded(st *state.State) bool {
	for _, t := range st.Tasks {
		if !t.Status.Terminal() {
			return false
		}
	}
	return len(st.Tasks) > 0
}
