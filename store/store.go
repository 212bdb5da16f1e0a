package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/state"
)

// Store is a state root: the runs and the per-agent mail tree
// (docs/files.md, Layout; docs/nats.md).
type Store interface {
	// Create makes a new run whose log begins with first: seq 1, type
	// run.created, Data the run's state.Manifest. It also gives the
	// leader (first.Actor) a mailbox. A run appears whole or not at
	// all. An id in use in any letter case is crew.ErrConflict; a bad
	// id crew.ErrInvalid.
	Create(ctx context.Context, first *events.Event) (Log, error)
	// Open opens an existing run: crew.ErrNotFound when there is none,
	// crew.ErrDamaged when its manifest cannot be read.
	Open(ctx context.Context, id string) (Log, error)
	// Runs returns the ids of the runs, sorted.
	Runs(ctx context.Context) ([]string, error)
	// Mail returns the per-agent mail tree (docs/mail-tree.md).
	Mail() mailbox.Store
	// CreateMailbox makes agent's mailbox if it has none, and returns a
	// function that removes it again if this call made it, for an
	// operation that then fails (docs/guarantees.md, 5).
	CreateMailbox(agent string) (undo func(), err error)
	// LockAgents lets creators of runs and tasks take turns from the
	// check that an agent is not a leader in one run and a task's agent
	// in another (docs/concepts.md, Reserved names) until what they
	// create is committed: the file store locks state/.agents.lock, the
	// NATS store the key agents of the bucket CREW_LOCKS. It waits for
	// the lock and returns the function that lets it go.
	LockAgents() (unlock func(), err error)
	// Dir is the state root's directory, "" for a store without one.
	Dir() string
	// String names the store in messages, without credentials.
	String() string
}

// Log is one run's log. Its methods are safe for concurrent use; any
// number of processes may hold a Log of the same run.
type Log interface {
	// Manifest returns the run's manifest, as read when it was opened.
	Manifest() state.Manifest
	// Commit validates c against the run's state at the end of its log
	// and appends the event c.Validate returns as the next seq, durably,
	// before it returns it (nil, nil when Validate has nothing to
	// write). Validate may run more than once (a store that lost a race
	// validates again), so it must have no effects of its own. A
	// cancelled ctx commits nothing. Errors: Validate's, ctx's,
	// crew.ErrDamaged for a log whose end is damaged, or the store's.
	// Every store commits through one engine (store/commit).
	Commit(ctx context.Context, c Change) (*events.Event, error)
	// State returns the state at the end of the log, reduced into
	// empty: state.New() (every open message), state.NewTasks() (tasks
	// only) or state.For(participant). Damage met on the way is in
	// State.Damage.
	State(ctx context.Context, empty *state.State) (*state.State, error)
	// Events returns a cursor on the log after seq since (0: the whole
	// log). Close it.
	Events(since int64) (Cursor, error)
	// Watch returns a Waiter that wakes when the log may have grown
	// after Watch was called. With participants (task ids, state.Leader)
	// it wakes only when an event that concerns one of them
	// (state.Concerns) may have been committed: a commit wakes the
	// waiters it concerns, not every waiter of the run.
	Watch(participants ...string) Waiter
	// Bodies calls fn with the stored message of each open entry of
	// list, which is in seq order, carrying the entry's status.
	Bodies(ctx context.Context, list []*state.Open, fn func(*events.Message) error) error
	// SetAsync sets whether operations return as soon as their events
	// are durable (true), or only once the projections a reader looks
	// at next (mailbox files, mail tree) are written too (false, the
	// default); the snapshots may follow. A store that projects before
	// an operation returns (NATS) ignores it.
	SetAsync(on bool)
	// Sync waits until the projections of every operation committed
	// through the Log are written, snapshots included: at once on a
	// store that projects before an operation returns.
	Sync()
	// Dir is the run's directory, "" for a run without one.
	Dir() string
	// String names the log in messages: the path of events.jsonl, or the
	// run on its server.
	String() string
}

// A Change is one operation to commit.
type Change struct {
	// Validate sees the run's state (with the effects of the changes
	// committed before it in the same batch) and returns the event to
	// append, without seq, time or run (the log stamps them); nil means
	// nothing to write.
	Validate func(*state.State) (*events.Event, error)
	// State says what Validate reads, as Log.State's empty does: nil or
	// state.NewTasks() for the tasks only, state.New() or
	// state.For(participant) for open messages too. Or it is a state
	// Log.State returned (its Seq is not 0), which Commit brings up to
	// the log's end and Validate sees (so that the store need not load
	// every open message again), then brings past the committed event.
	// Validate may see more than State asks for. A state for one task
	// (state.For a task id) holds no other task: Validate must ask it
	// nothing of another (whether an id is taken, for one).
	State *state.State
}

// Open reports whether c's Validate reads open messages.
func (c Change) Open() bool { return c.State != nil && c.State.Open != nil }

// View returns the state Log.State returned that c's Validate sees, or
// nil when c.State is empty (Validate then sees the store's own).
func (c Change) View() *state.State {
	if c.State != nil && c.State.Seq > 0 {
		return c.State
	}
	return nil
}

// FirstEvent checks that first can begin a run's log: seq 1, type
// run.created, its Data the run's manifest naming first.Run, with a
// valid id. It returns the manifest, or an error wrapping
// crew.ErrInvalid. Every store's Create checks it before it makes
// anything.
func FirstEvent(first *events.Event) (state.Manifest, error) {
	var m state.Manifest
	if err := json.Unmarshal(first.Data, &m); err != nil || first.Type != events.RunCreated || first.Seq != 1 || m.ID != first.Run {
		return m, fmt.Errorf("create run %s: the first event must be run.created with seq 1 and the run's manifest: %w", first.Run, crew.ErrInvalid)
	}
	if err := crew.ValidateID("run", m.ID); err != nil {
		return m, err
	}
	return m, crew.ValidateID("agent", m.Leader)
}

// Cursor reads a run's events from a seq on, in order: Next returns the
// next event, io.EOF at the end of the log (and, called again later,
// what was appended meanwhile), a *events.DamageError for a damaged
// line of a file log (then goes on); Scan is events.Scan over Next.
type Cursor interface {
	Next() (events.Event, error)
	Scan(damage func(*events.DamageError), fn func(*events.Event) error) error
	Close() error
}

// Waiter is what Log.Watch returns: Wait blocks until the log may have
// grown (a hint: read from a cursor to see what is new) or ctx ends;
// Close stops it.
type Waiter interface {
	Wait(context.Context) error
	Close() error
}

// FirstRescan returns when a new waiter whose safety-net rescan runs
// every period rescans first: after a random part of the period, from
// half of it to all of it, so that waiters started together (a fan-out)
// do not all rescan together ever after, and a young waiter does not
// rescan sooner (a lost wake-up is no likelier early in a wait). Both
// stores' waiters take it.
func FirstRescan(period time.Duration) time.Time {
	return time.Now().Add(period/2 + rand.N(period/2+1))
}

// Hinter is a Waiter whose wake-ups may name the event that woke it:
// Hint returns the lowest seq its wake-ups named since the last call
// (0: none), and forgets it. A hint is where an owner may look first
// (one read, where the log after its question may be long), never a
// reason to look no further: wake-ups can be forged or lost, so an owner
// that finds nothing there reads as it would without it. The NATS
// store's participant waiters are Hinters.
type Hinter interface {
	Hint() int64
}

// Repairer is a Store whose runs' bytes can be damaged and repaired: the
// file store's. A store without files to damage (NATS) is not one.
type Repairer interface {
	// OpenForRepair opens run id as Open does, and also a run whose own
	// files Open refuses as damaged (the file store's manifest.json
	// missing or garbled, which the log's first event can rebuild), for
	// Repair to mend.
	OpenForRepair(ctx context.Context, id string) (Log, error)
	// Repair verifies l's log (a Log of this store), moves damaged bytes
	// aside and rebuilds every projection (docs/guarantees.md, 4).
	Repair(ctx context.Context, l Log) (*RepairReport, error)
}

// RepairReport says what a repair found and did.
type RepairReport struct {
	Run         string   `json:"run"`
	Events      int64    `json:"events"`                // events in the log after repair
	Damaged     []string `json:"damaged,omitempty"`     // what was wrong, one entry per place
	Quarantine  string   `json:"quarantine,omitempty"`  // file the damaged bytes were moved to
	LostSeqs    []int64  `json:"lostSeqs,omitempty"`    // seqs that no readable line holds
	TornBytes   int64    `json:"tornBytes,omitempty"`   // bytes of an unterminated last line moved aside
	Rebuilt     bool     `json:"rebuilt"`               // projections rebuilt from the log
	TempRemoved int      `json:"tempRemoved,omitempty"` // temporary files left by killed writers, removed
	WakeRemoved int      `json:"wakeRemoved,omitempty"` // wake-up FIFOs left by killed waiters (file store), removed
	// CopiesRemoved counts the mail-tree copies of messages the log no
	// longer holds (quarantined), removed from the tree.
	CopiesRemoved int   `json:"copiesRemoved,omitempty"`
	RepairedSeq   int64 `json:"repairedSeq,omitempty"`
}
