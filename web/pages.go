package web

import (
	"errors"
	"github.com/crew-dev/crew/app"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/report"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/supervise"
	"github.com/crew-dev/crew/task"
)

// runRow is a run in the runs list.
type runRow struct {
	Manifest state.Manifest
	Counts   []stateCount
	Tasks    int
	Damage   string
}

// stateCount is how many tasks of a run are in one state.
type stateCount struct {
	State task.State
	N     int
}

// runsPage lists the runs, newest first, with their tasks counted by
// state. Runs whose manifest cannot be read are named in the banner.
func (s *Server) runsPage(w http.ResponseWriter, r *http.Request) {
	root, err := s.app.Root()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ms, bad, err := root.List()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var rows []runRow
	var damage []string
	for _, e := range bad {
		damage = append(damage, e.Error())
	}
	for i := len(ms) - 1; i >= 0; i-- {
		row := runRow{Manifest: ms[i]}
		rn, err := s.open(ms[i].ID)
		var st *state.State
		if err == nil {
			st, err = rn.TaskState()
		}
		if err != nil {
			row.Damage = err.Error()
		} else {
			row.Counts, row.Tasks = countStates(st), len(st.Tasks)
			if e := st.Err(); e != nil {
				row.Damage = e.Error()
			}
		}
		rows = append(rows, row)
	}
	s.render(w, r, "runs", &page{Title: "Runs", Stream: "/live", Damage: strings.Join(damage, "; "), Data: rows})
}

func countStates(st *state.State) []stateCount {
	n := map[task.State]int{}
	for _, t := range st.Tasks {
		n[t.Status]++
	}
	var out []stateCount
	for _, s := range task.States {
		if n[s] > 0 {
			out = append(out, stateCount{s, n[s]})
		}
	}
	return out
}

// card is a task on the board, its text ready to show (human.Escape
// applied): a board of a thousand tasks renders fast when the template
// only places strings.
type card struct {
	ID, Agent, Status, Title, Reason string
	Ran                              string    // running time, from its start to its end or to now; "" if never started
	RanSince                         string    // its start while it runs (the page ticks it), else ""
	Life                             *life     // what it is doing, while it is underway (run.Underway)
	Last, LastAgo                    string    // the time it ended (else of its last event), and the time since then
	Added, AddedAgo                  string    // the time it was added, and the time since then
	Ended                            bool      // in a terminal state
	Question                         *question // the open question of a waiting task
}

// life is what a task underway is doing, as the command line says it
// (run.LivenessOf, through supervise.Liveness): State is run.LiveWorking,
// run.LiveQuiet, run.LiveWaiting or run.LiveDead, Since its time
// (events.Time's text) and Ago the time since then.
type life struct {
	State, Since, Ago string
	PID               int
}

// question is a waiting task's open question on its card.
type question struct {
	From, SentAt, Ago, Body string
}

// column is the tasks in one state.
type column struct {
	State task.State
	Cards []card
}

// board is a run's board: its tasks by state, the leader's open
// messages that are no questions (reports to acknowledge).
type board struct {
	Manifest state.Manifest
	Summary  string
	Columns  []column
	Reports  []events.Message // open reports and crew's notices (failure, timeout), newest last
	More     int              // open reports not shown
	// Undelivered are the messages sent to workers and not delivered
	// after Options.UndeliveredAfter, with the likely reason.
	Undelivered []app.Undelivered
}

// maxReports is how many open reports the board shows.
const maxReports = 50

// boardPage shows a run's tasks in columns by state, with the open
// question of each waiting task inline, and the rest of what is open for
// the leader to acknowledge: reports, and crew's failures and timeouts,
// and the messages not delivered to the workers. It reads the run's
// whole state (snapshot and the log after it) and the workers'
// heartbeats once, and the bodies of the messages it shows.
func (s *Server) boardPage(w http.ResponseWriter, r *http.Request) {
	rn, err := s.open(r.PathValue("run"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	st, err := rn.State() // whole: the leader's open messages and those not delivered to the workers
	if err != nil {
		s.fail(w, r, err)
		return
	}
	b := &board{Manifest: rn.Manifest, Summary: report.Summary(st)}
	questions := map[string]*events.Message{}
	var list []*state.Open
	var reports []*state.Open
	for _, o := range st.OpenFor(run.Leader) {
		if o.Kind == events.KindQuestion {
			list = append(list, o)
		} else {
			reports = append(reports, o)
		}
	}
	if len(reports) > maxReports {
		b.More = len(reports) - maxReports
		reports = reports[len(reports)-maxReports:]
	}
	list = append(list, reports...)
	sort.Slice(list, func(i, j int) bool { return list[i].Seq < list[j].Seq })
	err = rn.Log().Bodies(ctx, list, func(m *events.Message) error {
		if m.Kind == events.KindQuestion {
			c := *m
			questions[m.ID] = &c
		} else {
			b.Reports = append(b.Reports, *m)
		}
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := time.Now()
	live := supervise.Liveness(rn, st, s.quiet, now)
	if b.Undelivered, err = app.UndeliveredIn(rn, st, live, s.undelivered); err != nil {
		s.fail(w, r, err)
		return
	}
	b.Columns = columns(st, questions, live, now)
	s.render(w, r, "board", &page{Title: rn.ID(), Run: rn.ID(), Tab: "board", Stream: liveURL(rn), Life: true, Seq: st.Seq, Damage: errText(st.Err()), Data: b})
}

// columns puts the tasks in columns by state, in creation order.
func columns(st *state.State, questions map[string]*events.Message, live map[string]*run.Liveness, now time.Time) []column {
	cols := make([]column, len(task.States))
	at := map[task.State]int{}
	for i, s := range task.States {
		cols[i].State, at[s] = s, i
	}
	for _, t := range st.TaskList() {
		i := at[t.Status]
		cols[i].Cards = append(cols[i].Cards, cardOf(t, questions[t.Question], live[t.ID], now))
	}
	return cols
}

func cardOf(t *state.Task, q *events.Message, l *run.Liveness, now time.Time) card {
	c := card{ID: t.ID, Agent: t.Agent, Status: string(t.Status), Title: human.Escape(t.Title), Reason: human.Escape(t.Reason),
		LastAgo: dur(now.Sub(t.LastEventAt.Time).Seconds()), Last: t.LastEventAt.String(), Ended: t.Status.Terminal(),
		Added: t.CreatedAt.String(), AddedAgo: dur(now.Sub(t.CreatedAt.Time).Seconds())}
	if t.EndedAt != nil {
		c.Last, c.LastAgo = t.EndedAt.String(), dur(now.Sub(t.EndedAt.Time).Seconds())
	}
	if l != nil {
		c.Life = &life{State: l.State, Since: l.Since.String(), Ago: dur(now.Sub(l.Since.Time).Seconds()), PID: l.PID}
	}
	if t.StartedAt != nil {
		end := now
		if t.EndedAt != nil {
			end = t.EndedAt.Time
		} else {
			c.RanSince = t.StartedAt.String()
		}
		c.Ran = dur(end.Sub(t.StartedAt.Time).Seconds())
	}
	if q != nil {
		c.Question = &question{From: q.From, SentAt: q.SentAt.String(), Ago: dur(now.Sub(q.SentAt.Time).Seconds()), Body: human.Escape(q.Body)}
	}
	return c
}

func liveURL(rn *run.Run) string { return "/runs/" + rn.ID() + "/live" }

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// thread is a task's page: the task with its timings, result and check,
// and every message of its thread with its current status.
type thread struct {
	Task     *report.Task
	Life     *run.Liveness // what it is doing, while it is underway
	Messages []*report.Message
	Open     []*report.Message // what the leader has of the task to acknowledge: reports, crew's failures and timeouts
	Lanes    chart
}

// threadPage shows a task and its thread. It streams the run's log once
// (report.Load for one task).
func (s *Server) threadPage(w http.ResponseWriter, r *http.Request) {
	rn, id, ok := s.openTask(w, r)
	if !ok {
		return
	}
	rep, err := report.Load(rn, report.Options{Task: id})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	th := &thread{Task: rep.Tasks[0], Messages: rep.Messages, Lanes: lanes(rep)}
	if st, err := rn.TaskState(); err == nil {
		th.Life = supervise.Liveness(rn, st, s.quiet, time.Now())[id]
	}
	for _, m := range rep.Messages {
		if m.Direction == events.Outbox && m.Kind != events.KindQuestion && m.Status != events.StatusAcknowledged && m.Status != events.StatusRejected {
			th.Open = append(th.Open, m)
		}
	}
	s.render(w, r, "thread", &page{Title: id + " · " + rn.ID(), Run: rn.ID(), Tab: "thread", Task: id, Stream: liveURL(rn), Life: true, Seq: rep.Seq, Damage: errText(rep.Err()), Data: th})
}

// eventRow is an event in the event log, as the page and its live
// updates show it.
type eventRow struct {
	Seq     int64  `json:"seq"`
	At      string `json:"at"`
	Type    string `json:"type"`
	Task    string `json:"task,omitempty"`
	Actor   string `json:"actor,omitempty"`
	Summary string `json:"summary,omitempty"`
}

// summaryRunes is how much of a body an event row shows.
const summaryRunes = 200

func rowOf(e *events.Event) eventRow {
	row := eventRow{Seq: e.Seq, At: e.At.String(), Type: e.Type, Task: e.Task, Actor: e.Actor}
	var parts []string
	if e.From != "" || e.To != "" {
		parts = append(parts, e.From+" → "+e.To)
	}
	if m := e.Message; m != nil {
		parts = append(parts, m.Kind+" from "+m.From+" to "+m.To+": "+cut(m.Body, summaryRunes))
	}
	if len(e.MessageIDs) > 0 {
		parts = append(parts, strings.Join(e.MessageIDs, ", "))
	}
	if e.Reason != "" {
		parts = append(parts, "reason: "+cut(e.Reason, summaryRunes))
	}
	row.Summary = human.Escape(strings.Join(parts, " · ")) // shown as text, as the CLI shows it
	return row
}

// cut shortens s to n runes, marking the cut with "…".
func cut(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + "…"
		}
		i++
	}
	return s
}

// eventsShown is how many of the last events the event log shows.
const eventsShown = 500

// eventLog is the event log page: the last events, newest last.
type eventLog struct {
	Rows  []eventRow
	First int64 // seq of the first row
}

// eventsPage shows the last eventsShown events of a run, read from a
// cursor placed by seq, and follows the log live. Damaged lines are
// named in the banner.
func (s *Server) eventsPage(w http.ResponseWriter, r *http.Request) {
	rn, err := s.open(r.PathValue("run"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	st, err := rn.TaskState()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	since := max(st.Seq-eventsShown, 0)
	c, err := rn.Events(since)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer c.Close()
	log := &eventLog{First: since + 1}
	damage := st.Damage
	err = c.Scan(func(de *events.DamageError) { damage = append(damage, de.Error()) }, func(e *events.Event) error {
		if e.Seq > st.Seq {
			return events.ErrStopScan
		}
		log.Rows = append(log.Rows, rowOf(e))
		return nil
	})
	if err != nil && !errors.Is(err, crew.ErrDamaged) {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, "events", &page{Title: "Events · " + rn.ID(), Run: rn.ID(), Tab: "events", Stream: liveURL(rn), Seq: st.Seq, Damage: strings.Join(dedupe(damage), "; "), Data: log})
}

func dedupe(list []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// timeline is the timeline page: a lane per task, on the axis from
// From to To (the run's creation to its end, or to now).
type timeline struct {
	Lanes    chart
	From, To string
	Span     string // To - From, for people
}

// timelinePage draws a lane per task over the run's time. It streams
// the run's log once (report.Load, bodies cut).
func (s *Server) timelinePage(w http.ResponseWriter, r *http.Request) {
	rn, err := s.open(r.PathValue("run"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rep, err := report.Load(rn, report.Options{BodyRunes: summaryRunes})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, "timeline", &page{Title: "Timeline · " + rn.ID(), Run: rn.ID(), Tab: "timeline", Stream: liveURL(rn), Seq: rep.Seq, Damage: errText(rep.Err()), Data: timelineOf(rep)})
}

func timelineOf(rep *report.Report) *timeline {
	from, to := axis(rep)
	return &timeline{Lanes: lanes(rep), From: from.UTC().Format(events.TimeLayout), To: to.UTC().Format(events.TimeLayout), Span: dur(to.Sub(from).Seconds())}
}
