package app

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/run"
)

// Identity is who acts, and where, when a request does not say: the
// command line's --run, --task and --as (CREW_RUN, CREW_TASK,
// CREW_AGENT), or those crew mcp was started with.
type Identity struct {
	Run  string // run id; "" means the most recently created run
	Task string // the worker's task; "" for a leader
	As   string // acting agent; "" means the run's leader, or a worker's task agent
}

// App carries out crew's operations on one state root for one identity.
// Its methods are safe for concurrent use: crew mcp serves every tool
// call of a session with one App, so the calls share the root, the runs
// it opened and the state each run's log keeps.
type App struct {
	root     func() (*run.Root, error)
	Identity Identity
	taken    atomic.Pointer[Taken] // the run Run took as the newest, among others
}

// Taken is the run an App took as the most recently created because its
// identity named none, while the root holds others (App.Taken): a front
// end says so, since a listing of the wrong run looks like an empty one.
type Taken struct {
	Run  string // the run taken
	Runs int    // how many runs the root holds
}

// New returns an App over the state root that root finds (called by
// each operation; it should find or dial the root once and return it
// again after) acting for id.
func New(root func() (*run.Root, error), id Identity) *App {
	return &App{root: root, Identity: id}
}

// Root returns the state root.
func (a *App) Root() (*run.Root, error) { return a.root() }

// Run opens run id, else the identity's run, else the most recently
// created one. Errors: crew.ErrInvalid for a bad id, crew.ErrNotFound
// when there is no such run (or none at all).
func (a *App) Run(id string) (*run.Run, error) {
	root, err := a.root()
	if err != nil {
		return nil, err
	}
	if id == "" {
		id = a.Identity.Run
	}
	if id == "" {
		r, runs, err := root.Latest()
		if err == nil && runs > 1 {
			a.taken.Store(&Taken{Run: r.ID(), Runs: runs})
		}
		return r, err
	}
	return root.Open(id)
}

// Taken returns the run that Run took as the newest while the root held
// others, or nil when the identity named its run, or the root holds one.
func (a *App) Taken() *Taken { return a.taken.Load() }

// task returns the worker's task: id, else the identity's. None is
// crew.ErrInvalid.
func (a *App) task(id string) (string, error) {
	if id == "" {
		id = a.Identity.Task
	}
	if id == "" {
		return "", fmt.Errorf("no task: give --task ID or set CREW_TASK: %w", crew.ErrInvalid)
	}
	return id, crew.ValidateID("task", id)
}

// leader opens the run a leader acts in and returns the agent acting as
// its leader: as, else the identity's, else the run's leader.
func (a *App) leader(runID, as string) (*run.Run, string, error) {
	r, err := a.Run(runID)
	if err != nil {
		return nil, "", err
	}
	actor, err := a.actor(as, r.Manifest.Leader)
	if err != nil {
		return nil, "", err
	}
	return r, actor, nil
}

// worker resolves a worker's task (taskID, else the identity's:
// required), its run, and the agent acting for it: as, else the
// identity's, else the task's agent.
func (a *App) worker(runID, taskID, as string) (*run.Run, string, string, error) {
	return a.taskAndActor(runID, taskID, as, func(r *run.Run, id string) string { return taskAgent(r, id) })
}

// taskAndActor resolves an operation on a task: its run, its task (id,
// else the identity's; required) and the agent acting: as, else the
// identity's, else def(run, task).
func (a *App) taskAndActor(runID, taskID, as string, def func(*run.Run, string) string) (*run.Run, string, string, error) {
	id, err := a.task(taskID)
	if err != nil {
		return nil, "", "", err
	}
	r, err := a.Run(runID)
	if err != nil {
		return nil, "", "", err
	}
	actor, err := a.actor(as, "")
	if err != nil {
		return nil, "", "", err
	}
	if actor == "" {
		actor = def(r, id)
	}
	return r, id, actor, nil
}

// actor returns as, else the identity's agent, else def; a bad name is
// crew.ErrInvalid.
func (a *App) actor(as, def string) (string, error) {
	if as == "" {
		as = a.Identity.As
	}
	if as == "" {
		return def, nil
	}
	return as, crew.ValidateID("agent", as)
}

// taskAgent is the agent a task's worker acts as: the task's agent, or
// the task id when the task cannot be read (the operation then says
// what is wrong).
func taskAgent(r *run.Run, id string) string {
	if st, err := r.TaskState(); err == nil {
		if t := st.Tasks[id]; t != nil {
			return t.Agent
		}
	}
	return id
}

// ParseDuration parses a --timeout style value: a Go duration (90s, 10m,
// 1h30m) or whole days (2d). A negative or malformed value is
// crew.ErrInvalid.
func ParseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		// Digits only, and few enough days that the duration does not
		// overflow (to a negative one that would time out at once).
		n, err := strconv.ParseInt(days, 10, 64)
		if err == nil && n >= 0 && days[0] != '+' && time.Duration(n) <= time.Duration(1<<63-1)/(24*time.Hour) {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("invalid duration %q: use e.g. 30s, 10m, 2h, 1d: %w", s, crew.ErrInvalid)
	}
	return d, nil
}
