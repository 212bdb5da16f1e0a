package report

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

// Report is a run as of one seq: its manifest, its tasks with their
// timings, and every message with its current status. In JSON (the json
// format) it is one object with these keys.
type Report struct {
	Manifest state.Manifest `json:"manifest"`
	Seq      int64          `json:"seq"`         // last event the report reflects
	At       events.Time    `json:"generatedAt"` // when the report was made
	Summary  string         `json:"summary"`     // "3/5 done · 1 failed · 1 waiting"
	Timings  Timings        `json:"timings"`
	Tasks    []*Task        `json:"tasks"`              // in creation order
	Messages []*Message     `json:"messages,omitempty"` // in seq order; a broadcast once per recipient (JSON writes it last, always)
	Counts   []KindCount    `json:"counts"`             // per message kind, in the order of Kinds
	Damage   []string       `json:"damage,omitempty"`

	ends []end // task endings in seq order, for the diagram
}

// Timings are the run's times. Seconds runs from the run's creation to
// its end (the last task's end) or, while a task is still open, to At.
type Timings struct {
	CreatedAt   events.Time  `json:"createdAt"`
	EndedAt     *events.Time `json:"endedAt,omitempty"` // when every task had ended
	LastEventAt events.Time  `json:"lastEventAt"`
	Seconds     float64      `json:"seconds"`
}

// Task is a task of the run (as reduced by state.State) with what the log
// adds: how long it took, how long it waited for answers, its messages,
// its last report and its done-when check.
type Task struct {
	*state.Task
	// Seconds is the task's duration: from its (last) start to its end,
	// or to the report's time while it runs; 0 when it never started.
	Seconds float64 `json:"seconds"`
	// WaitingSeconds is the time it spent waiting for responses to its
	// questions, in seconds.
	WaitingSeconds float64 `json:"waitingSeconds"`
	// Messages counts the messages of its thread, both directions.
	Messages int `json:"messages"`
	// Result is the body of the last report the task's worker sent.
	Result string `json:"result,omitempty"`
	// Check is the done-when check its completion passed.
	Check *state.Check `json:"check,omitempty"`
	// AnsweredByDefault counts its questions whose deadline passed
	// unanswered, so that its worker went on with their default answer.
	AnsweredByDefault int `json:"answeredByDefault,omitempty"`
	// Spans are the times it spent running and waiting, in order (for a
	// timeline; not part of the JSON format).
	Spans []Span `json:"-"`
}

// Span is a stretch of time a task spent in one state (running or
// waiting). End is the report's time for the span still open.
type Span struct {
	State      task.State
	Start, End time.Time
}

// Message is a message of the run with its current status (Status,
// DeliveredAt, AcknowledgedAt, RejectedAt, Reason) computed from the log.
// A broadcast appears once per recipient, with To set to the recipient's
// task.
type Message = events.Message

// KindCount counts the messages of one kind by current status. A
// broadcast counts once per recipient.
type KindCount struct {
	Kind         string `json:"kind"`
	Messages     int    `json:"messages"`
	Pending      int    `json:"pending"`
	Delivered    int    `json:"delivered"`
	Acknowledged int    `json:"acknowledged"`
	Rejected     int    `json:"rejected"`
}

// Kinds lists the message kinds in the order reports show them: the
// order of events.Kinds, the table of kinds.
var Kinds = events.Kinds

// end is a task reaching a terminal state.
type end struct {
	Seq    int64
	Task   string
	Status task.State
	Reason string
}

// Options tune Load.
type Options struct {
	// BodyRunes keeps at most this many runes of each message body (and
	// reason), marking a cut with "…"; 0 keeps them whole. Formats that
	// shorten bodies anyway load less this way.
	BodyRunes int
	// Now is the report's time, used for tasks still open; zero means
	// time.Now().
	Now time.Time
	// Task, when set, reports that task only: Tasks holds it alone and
	// Messages its thread (what it sent and received, a broadcast's copy
	// to it). An unknown task is crew.ErrNotFound.
	Task string
}

// Load reads a report of r: the run's state (state.State) and, streamed, its
// log up to the state's seq. A damaged log does not stop it: the damage is
// listed in Report.Damage (see Err) and the rest is reported. Errors are
// I/O errors.
//
// The report holds every message of the run, with its body cut to
// o.BodyRunes: memory grows with the messages, not with the log's other
// events. (Measured: a run of 100,000 one-KiB messages reports in about
// 2 s, at about 150 MB for markdown and mermaid and 280-380 MB for json
// and junit, which keep whole bodies.)
func Load(r *run.Run, o Options) (*Report, error) {
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	st, err := r.TaskState() // reads the whole log below: needs no open messages
	if err != nil {
		return nil, err
	}
	rep := &Report{Manifest: r.Manifest, Seq: st.Seq, At: events.Time{Time: now.UTC().Truncate(time.Millisecond)}, Summary: Summary(st)}
	rep.Timings.CreatedAt = r.Manifest.CreatedAt
	f := &folder{rep: rep, o: o, byID: map[string]*Task{}, copies: map[string]*Message{}, waitingSince: map[string]events.Time{}}
	if o.Task != "" {
		if _, err := st.Task(o.Task); err != nil {
			return nil, err
		}
	}
	for _, t := range st.TaskList() {
		if o.Task != "" && t.ID != o.Task {
			continue
		}
		rt := &Task{Task: t}
		rep.Tasks = append(rep.Tasks, rt)
		f.byID[t.ID] = rt
	}
	c, err := r.Events(0)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	err = c.Scan(func(de *events.DamageError) { rep.Damage = append(rep.Damage, de.Error()) }, func(e *events.Event) error {
		if e.Seq > st.Seq {
			return events.ErrStopScan // appended after the state was read
		}
		f.fold(e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	f.finish(now)
	return rep, nil
}

// A folder folds a run's events into its report: messages with their
// statuses (state.MessageUpdates), time spent waiting, task ends.
type folder struct {
	rep          *Report
	o            Options
	byID         map[string]*Task
	copies       map[string]*Message // by state.Key: a broadcast has a copy per recipient
	waitingSince map[string]events.Time
}

func (f *folder) fold(e *events.Event) {
	rep := f.rep
	rep.Timings.LastEventAt = e.At
	if m := e.Message; m != nil {
		m.Body = cut(m.Body, f.o.BodyRunes)
		if m.To == events.Broadcast {
			for _, to := range state.Recipients(e) {
				if f.o.Task != "" && to != f.o.Task {
					continue
				}
				cp := *m
				cp.To = to
				f.copies[state.Key(m.ID, m.To, to)] = &cp
				rep.Messages = append(rep.Messages, &cp)
			}
		} else if f.o.Task == "" || m.Task == f.o.Task {
			f.copies[m.ID] = m
			rep.Messages = append(rep.Messages, m)
		}
		if t := f.byID[m.Task]; t != nil && m.Kind == events.KindReport {
			t.Result = m.Body
		}
	}
	for _, u := range state.MessageUpdates(e) {
		m := f.copies[state.Key(u.ID, events.Broadcast, u.Task)]
		if m == nil {
			m = f.copies[u.ID]
		}
		if m != nil {
			update(m, u, f.o.BodyRunes)
		}
	}
	if t := f.byID[e.Task]; t != nil && e.To != "" {
		f.transition(t, e)
		if state.DefaultOf(e) != nil {
			t.AnsweredByDefault++
		}
	}
}

// transition notes a task's spans, its waiting time and its ends.
func (f *folder) transition(t *Task, e *events.Event) {
	if n := len(t.Spans); n > 0 && t.Spans[n-1].End.IsZero() {
		t.Spans[n-1].End = e.At.Time
	}
	if to := task.State(e.To); to == task.Running || to == task.Waiting {
		t.Spans = append(t.Spans, Span{State: to, Start: e.At.Time})
	}
	switch {
	case e.To == string(task.Waiting) && e.From != string(task.Waiting):
		f.waitingSince[t.ID] = e.At
	case e.From == string(task.Waiting) && e.To != string(task.Waiting):
		if since, ok := f.waitingSince[t.ID]; ok {
			t.WaitingSeconds += secs(e.At.Sub(since.Time))
			delete(f.waitingSince, t.ID)
		}
	}
	switch {
	case e.Type == events.TaskRetried:
		t.Check = nil
	case task.State(e.To).Terminal():
		if ch := state.CheckOf(e); ch != nil {
			t.Check = ch
		}
		f.rep.ends = append(f.rep.ends, end{Seq: e.Seq, Task: t.ID, Status: task.State(e.To), Reason: cut(e.Reason, f.o.BodyRunes)})
	}
}

// finish computes what needs every event: durations as of now, message
// counts.
func (f *folder) finish(now time.Time) {
	rep := f.rep
	for id, since := range f.waitingSince {
		f.byID[id].WaitingSeconds += secs(now.Sub(since.Time))
	}
	allEnded := len(rep.Tasks) > 0
	var last time.Time
	for _, t := range rep.Tasks {
		if n := len(t.Spans); n > 0 && t.Spans[n-1].End.IsZero() {
			t.Spans[n-1].End = now
		}
		switch {
		case t.StartedAt == nil:
		case t.EndedAt != nil:
			t.Seconds = secs(t.EndedAt.Sub(t.StartedAt.Time))
		default:
			t.Seconds = secs(now.Sub(t.StartedAt.Time))
		}
		if t.EndedAt == nil {
			allEnded = false
		} else if t.EndedAt.After(last) {
			last = t.EndedAt.Time
		}
	}
	for _, m := range rep.Messages {
		if t := f.byID[m.Task]; t != nil {
			t.Messages++
		} else if t := f.byID[m.To]; t != nil {
			t.Messages++ // a broadcast's copy
		}
	}
	if allEnded {
		rep.Timings.EndedAt = &events.Time{Time: last}
		rep.Timings.Seconds = secs(last.Sub(rep.Timings.CreatedAt.Time))
	} else {
		rep.Timings.Seconds = secs(now.Sub(rep.Timings.CreatedAt.Time))
	}
	rep.Counts = counts(rep.Messages)
}

// update applies a status change to a message copy: delivered only from
// pending; acknowledged and rejected are final.
func update(m *Message, u state.MessageUpdate, bodyRunes int) {
	if m.Status == events.StatusAcknowledged || m.Status == events.StatusRejected {
		return
	}
	at := u.At
	switch u.Status {
	case events.StatusDelivered:
		if m.Status == events.StatusPending {
			m.Status, m.DeliveredAt, m.DeliveredVia = u.Status, &at, u.Via
		}
	case events.StatusAcknowledged:
		m.Status, m.AcknowledgedAt = u.Status, &at
	case events.StatusRejected:
		m.Status, m.RejectedAt, m.Reason = u.Status, &at, cut(u.Reason, bodyRunes)
	}
}

func counts(msgs []*Message) []KindCount {
	by := map[string]*KindCount{}
	var out []KindCount
	for _, m := range msgs {
		k := by[m.Kind]
		if k == nil {
			k = &KindCount{Kind: m.Kind}
			by[m.Kind] = k
		}
		k.Messages++
		switch m.Status {
		case events.StatusDelivered:
			k.Delivered++
		case events.StatusAcknowledged:
			k.Acknowledged++
		case events.StatusRejected:
			k.Rejected++
		default:
			k.Pending++
		}
	}
	for _, kind := range Kinds {
		if k := by[kind]; k != nil {
			out = append(out, *k)
			delete(by, kind)
		}
	}
	for _, k := range by { // a kind this version does not know: still counted
		out = append(out, *k)
	}
	return out
}

// Err returns the damage met while reading the log as an error wrapping
// crew.ErrDamaged (exit 7), or nil: a report of a damaged log is written
// in full and then says so.
func (rep *Report) Err() error {
	if len(rep.Damage) == 0 {
		return nil
	}
	return fmt.Errorf("the log of run %s is damaged (%s); the report shows what could be read; run crew repair: %w",
		rep.Manifest.ID, strings.Join(rep.Damage, "; "), crew.ErrDamaged)
}

// Summary is a one-line count of a run's task states, completed first:
// "3/5 done · 1 failed · 1 waiting" (done counts every ended task).
func Summary(st *state.State) string {
	counts := map[task.State]int{}
	done := 0
	for _, t := range st.Tasks {
		counts[t.Status]++
		if t.Status.Terminal() {
			done++
		}
	}
	parts := []string{fmt.Sprintf("%d/%d done", done, len(st.Tasks))}
	for _, s := range task.States {
		if counts[s] > 0 && s != task.Completed {
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	return strings.Join(parts, " · ")
}

// question returns the open question of a waiting task, or nil.
func (rep *Report) question(t *Task) *Message {
	if t.Question == "" {
		return nil
	}
	for i := len(rep.Messages) - 1; i >= 0; i-- {
		if rep.Messages[i].ID == t.Question {
			return rep.Messages[i]
		}
	}
	return nil
}

// secs is d in seconds, to the millisecond (the log's resolution).
func secs(d time.Duration) float64 {
	return math.Round(d.Seconds()*1000) / 1000
}

// cut shortens s to at most n runes (n > 0), marking the cut with "…".
func cut(s string, n int) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	i, count := 0, 0
	for j := range s {
		if count == n-1 {
			i = j
		}
		count++
		if count > n {
			return s[:i] + "…"
		}
	}
	return s
}
