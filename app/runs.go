package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/report"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
	"github.com/crew-dev/crew/supervise"
	"github.com/crew-dev/crew/task"
)

// RunCreate is the request of RunCreate.
type RunCreate struct {
	// ID is the run's id; "" is a generated one, unless IDSet: an empty
	// --id is a mistake (an unset variable), not a request for one.
	ID     string `json:"id,omitempty" jsonschema:"the run id (default: generated, sortable by creation time)"`
	Title  string `json:"title,omitempty" jsonschema:"a one-line title"`
	Leader string `json:"leader,omitempty" jsonschema:"the leader agent's name (default: leader)"`
	IDSet  bool   `json:"-"`
}

// RunRef names a run: the request of Repair.
type RunRef struct {
	Run string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
}

// RunList is the request of RunList, which takes nothing: every run of
// the state root.
type RunList struct{}

// RunShow is the request of RunShow.
type RunShow struct {
	Run        string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	QuietAfter string `json:"quiet_after,omitempty" jsonschema:"a running task whose worker shows no sign of life for this duration (default 5m) is quiet"`
}

// RunWait is the request of RunWait.
type RunWait struct {
	Run        string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	Timeout    string `json:"timeout,omitempty" jsonschema:"give up after this duration (e.g. 30m); the call fails with class timeout"`
	QuietAfter string `json:"quiet_after,omitempty" jsonschema:"a running task whose worker shows no sign of life for this duration (default 5m) is quiet"`
	NudgeAfter string `json:"nudge_after,omitempty" jsonschema:"nudge a running task whose worker shows no sign of life for this duration, once per quiet spell (default: never)"`
	AllowEmpty bool   `json:"allow_empty,omitempty" jsonschema:"a run with no tasks is a success; without it, such a run fails with class conflict (a CI job whose task add failed must not pass)"`
	// Stop, when the timeout comes (or the wait is interrupted), stops
	// the run (RunStop) before returning, so that no worker outlives a
	// CI job.
	Stop bool `json:"stop,omitempty" jsonschema:"at the timeout, cancel every task that has not ended and stop every worker of the run (as crew_run_stop) before failing"`
}

// RunReport is the request of RunReport.
type RunReport struct {
	Run    string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	Format string `json:"format,omitempty" jsonschema:"json (default: structured), markdown, junit or mermaid (text)"`
}

// RunRecord is a run as run list, show and wait print it with --json:
// its manifest, a summary of its tasks ("3/5 done · 1 waiting"), and but
// for run list its last seq and tasks.
type RunRecord struct {
	state.Manifest
	TaskCount int           `json:"taskCount"`
	Summary   string        `json:"summary"`
	Seq       int64         `json:"seq,omitempty"`
	Tasks     []*state.Task `json:"tasks,omitempty"` // as run report's "tasks"
	// Live is what each task that has not ended is doing (RunShow), for
	// people; not in the record.
	Live map[string]*run.Liveness `json:"-"`
	// Stopped is what RunWait with Stop stopped when its time was up.
	Stopped *RunStopped `json:"stopped,omitempty"`
}

// TaskRecords are the run's tasks, each with what it is doing (Live).
func (rec *RunRecord) TaskRecords() []TaskRecord {
	recs := make([]TaskRecord, 0, len(rec.Tasks))
	for _, t := range rec.Tasks {
		recs = append(recs, TaskRecord{Task: t, Liveness: rec.Live[t.ID], Run: rec.ID})
	}
	return recs
}

// fullRecord is the record of a run with its tasks and last seq.
func fullRecord(m state.Manifest, st *state.State) *RunRecord {
	return &RunRecord{Manifest: m, TaskCount: len(st.Tasks), Summary: report.Summary(st), Tasks: st.TaskList(), Seq: st.Seq}
}

// BadRunRecord is a run that cannot be opened, as run list prints it:
// {"createdAt":time,"damaged":why,"id":ID}, createdAt when its log still
// tells it.
type BadRunRecord struct {
	CreatedAt *events.Time `json:"createdAt,omitempty"`
	Damaged   string       `json:"damaged"`
	ID        string       `json:"id"`
}

// RunListing is one run of RunList: Run, or Bad for one that cannot be
// opened or read.
type RunListing struct {
	Run *RunRecord
	Bad *BadRunRecord
}

// Record is the listing's record: Run or Bad.
func (l RunListing) Record() any {
	if l.Bad != nil {
		return l.Bad
	}
	return l.Run
}

// Unreadable is the error of a listing that went on past what it could
// not read (runs, mail files): Errs, each in order, and an error that
// counts them, wrapping crew.ErrTampered if any of them was a tampered
// state root (a symbolic link, no regular file), else crew.ErrDamaged.
type Unreadable struct {
	Errs []error
	err  error
}

func (u *Unreadable) Error() string { return u.err.Error() }
func (u *Unreadable) Unwrap() error { return u.err }

// unreadable is the Unreadable error of errs, whose count (of what) says
// summary: "%s could not be read; ...", or nil without errs.
func unreadable(errs []error, what, rest string) error {
	if len(errs) == 0 {
		return nil
	}
	class := crew.ErrDamaged
	for _, err := range errs {
		if errors.Is(err, crew.ErrTampered) {
			class = crew.ErrTampered
		}
	}
	return &Unreadable{Errs: errs, err: fmt.Errorf("%s could not be read%s: %w", human.Count(len(errs), what), rest, class)}
}

// RunCreate creates a run (its leader "leader" unless req.Leader says)
// and returns its manifest. Errors: crew.ErrInvalid
// for a bad id, title or leader, crew.ErrConflict for a run that exists.
func (a *App) RunCreate(_ context.Context, req RunCreate) (*state.Manifest, error) {
	if req.IDSet || req.ID != "" {
		if err := crew.ValidateID("run", req.ID); err != nil {
			return nil, err
		}
	}
	root, err := a.root()
	if err != nil {
		return nil, err
	}
	r, err := root.Create(run.CreateOptions{ID: req.ID, Title: req.Title, Leader: req.Leader})
	if err != nil {
		return nil, err
	}
	return &r.Manifest, nil
}

// RunList lists the runs of the state root, oldest first, each with a
// summary of its tasks. Runs that cannot be opened are listed too, saying
// why, in order of creation where their logs still tell it, else last
// (docs/cli.md); they, and runs whose log is damaged, make the error an
// *Unreadable after the whole list.
func (a *App) RunList(_ context.Context, _ RunList) ([]RunListing, error) {
	root, err := a.root()
	if err != nil {
		return nil, err
	}
	runs, bad, err := root.List()
	if err != nil {
		return nil, err
	}
	var all []*run.BadRun // the runs, good ones with no Err
	manifests := map[string]state.Manifest{}
	for _, m := range runs {
		manifests[m.ID] = m
		all = append(all, &run.BadRun{ID: m.ID, CreatedAt: m.CreatedAt})
	}
	for _, b := range bad {
		all = append(all, b.(*run.BadRun))
	}
	slices.SortStableFunc(all, func(a, b *run.BadRun) int {
		switch {
		case a.CreatedAt.IsZero() && !b.CreatedAt.IsZero():
			return 1 // age unknown: last
		case !a.CreatedAt.IsZero() && b.CreatedAt.IsZero():
			return -1
		}
		return a.CreatedAt.Compare(b.CreatedAt.Time)
	})
	out := []RunListing{}
	var failed []error
	for _, br := range all {
		if br.Err == nil {
			st, err := runState(root, br.ID)
			if err == nil {
				m := manifests[br.ID]
				out = append(out, RunListing{Run: &RunRecord{Manifest: m, TaskCount: len(st.Tasks), Summary: report.Summary(st)}})
				if err := st.Err(); err != nil {
					failed = append(failed, fmt.Errorf("run %s: %w", br.ID, err))
				}
				continue
			}
			br.Err = err
		}
		rec := &BadRunRecord{ID: br.ID, Damaged: crew.Message(br.Err)}
		if !br.CreatedAt.IsZero() {
			rec.CreatedAt = &br.CreatedAt
		}
		out = append(out, RunListing{Bad: rec})
		failed = append(failed, br)
	}
	return out, unreadable(failed, "run", "")
}

// runState opens run id and reads its tasks.
func runState(root *run.Root, id string) (*state.State, error) {
	r, err := root.Open(id)
	if err != nil {
		return nil, err
	}
	return r.TaskState()
}

// RunShow returns the run with its tasks, last seq and (Live) what each
// task that has not ended is doing. A damaged log returns the record as
// far as it could be read with an error wrapping crew.ErrDamaged.
func (a *App) RunShow(ctx context.Context, req RunShow) (*RunRecord, error) {
	r, err := a.Run(req.Run)
	if err != nil {
		return nil, err
	}
	st, live, err := tasksAlive(ctx, r, req.QuietAfter)
	if err != nil {
		return nil, err
	}
	rec := fullRecord(r.Manifest, st)
	rec.Live = live
	return rec, st.Err()
}

// Progress is what RunWait tells its caller each time the run may have
// changed (supervise.WaitOptions.Progress).
type Progress struct {
	Run   string                   // the run's id
	State *state.State             // its tasks
	Live  map[string]*run.Liveness // what each task that has not ended is doing
	// Waiting are the open questions, oldest first (read again only
	// when the tasks waiting change).
	Waiting []events.Message
	// Failed are the tasks whose failure the wait saw since the last
	// Progress, in task order: at the first, those failed when it
	// started; then each as it fails (again after a retry), once
	// (supervise.WaitOptions.Failed).
	Failed []*state.Task
}

// RunWait blocks until every task of the run has ended, calling
// progress (when not nil) each time the run may have changed, and
// returns the run's record as it then is (nil when it cannot be read).
// Errors (supervise.WaitRunWith): crew.ErrIncomplete when a task failed
// or was cancelled, crew.ErrTimeout after req.Timeout, crew.ErrDamaged
// for a damaged log, anywhere in it (the verdict reads the whole log);
// the record comes with them. A run without tasks returns at once:
// crew.ErrConflict ("run r1 has no tasks"), or nil with req.AllowEmpty.
func (a *App) RunWait(ctx context.Context, req RunWait, progress func(Progress)) (*RunRecord, error) {
	r, err := a.Run(req.Run)
	if err != nil {
		return nil, err
	}
	o := supervise.WaitOptions{AllowEmpty: req.AllowEmpty}
	if req.Timeout != "" {
		d, err := ParseDuration(req.Timeout)
		if err != nil {
			return nil, err
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	if req.QuietAfter != "" {
		if o.QuietAfter, err = ParseDuration(req.QuietAfter); err != nil {
			return nil, err
		}
	}
	if req.NudgeAfter != "" {
		if o.NudgeAfter, err = ParseDuration(req.NudgeAfter); err != nil {
			return nil, err
		}
	}
	if progress != nil {
		o.Failed, o.Progress = waitProgress(r, progress)
	}
	err = supervise.WaitRunWith(ctx, r, o)
	var stopped *RunStopped
	if req.Stop && (errors.Is(err, crew.ErrTimeout) || errors.Is(err, context.Canceled)) {
		why := "run wait timed out after " + req.Timeout
		if !errors.Is(err, crew.ErrTimeout) {
			why = "run wait was interrupted"
		}
		var serr error
		stopped, serr = a.RunStop(context.WithoutCancel(ctx), RunStop{Run: r.ID(), Reason: why})
		err = errors.Join(err, serr)
	}
	st, serr := r.TaskState()
	if serr != nil {
		return nil, err
	}
	rec := fullRecord(r.Manifest, st)
	rec.Stopped = stopped
	return rec, err
}

// waitProgress is supervise's callbacks for RunWait: failed notes each
// failure, and the progress callback hands progress each state with the
// failures noted since the last and the open questions, read again only
// when the tasks waiting change.
func waitProgress(r *run.Run, progress func(Progress)) (failed func(*state.Task), show func(*state.State, map[string]*run.Liveness)) {
	var (
		key     string
		waiting []events.Message
		fails   []*state.Task
	)
	failed = func(t *state.Task) { fails = append(fails, t) }
	return failed, func(st *state.State, live map[string]*run.Liveness) {
		if k := waitingKey(st); k != key {
			waiting, key = nil, k
			if k != "" {
				if pend, err := r.Pending(run.Leader); pend != nil && err == nil {
					waiting = questions(pend.Messages)
				}
			}
		}
		progress(Progress{Run: r.ID(), State: st, Live: live, Waiting: waiting, Failed: fails})
		fails = nil
	}
}

// waitingKey names the open questions of st, to tell when they change.
func waitingKey(st *state.State) string {
	var key string
	for _, t := range st.TaskList() {
		if t.Status == task.Waiting {
			key += t.Question + ","
		}
	}
	return key
}

// questions are the questions among msgs, oldest first.
func questions(msgs []events.Message) []events.Message {
	var qs []events.Message
	for _, m := range msgs {
		if m.Kind == events.KindQuestion {
			qs = append(qs, m)
		}
	}
	slices.SortStableFunc(qs, func(a, b events.Message) int { return int(a.Seq - b.Seq) })
	return qs
}

// RunReport writes a report of the run in req.Format (report.Formats;
// "" is json) to w. An unknown format is crew.ErrInvalid; a damaged
// log is reported in full, then is crew.ErrDamaged (report.Render).
func (a *App) RunReport(_ context.Context, req RunReport, w io.Writer) error {
	if req.Format == "" {
		req.Format = report.FormatJSON
	}
	if err := report.CheckFormat(req.Format); err != nil {
		return err
	}
	r, err := a.Run(req.Run)
	if err != nil {
		return err
	}
	return report.Render(w, r, req.Format)
}

// Repair verifies the run's log, quarantines damaged bytes (nothing is
// deleted) and rebuilds every projection (run.Run.Repair). The run is
// req.Run, else the identity's, else the latest, which may be one whose
// manifest is damaged (run.Root.OpenForRepair).
func (a *App) Repair(ctx context.Context, req RunRef) (*store.RepairReport, error) {
	root, err := a.root()
	if err != nil {
		return nil, err
	}
	id := req.Run
	if id == "" {
		id = a.Identity.Run
	}
	var r *run.Run
	if id != "" {
		r, err = root.OpenForRepair(id)
	} else if r, _, err = root.Latest(); err != nil {
		if bad := (*run.BadRun)(nil); errors.As(err, &bad) {
			r, err = root.OpenForRepair(bad.ID)
		}
	}
	if err != nil {
		return nil, err
	}
	return r.Repair(ctx)
}
