package run

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"os"
	"sort"
	"sync"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/jsonl"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/state"
)

// Projections follow the log (SPEC §2): once a batch of events is fsynced,
// the operations are committed, and a projection job brings the mailbox
// files, the mail tree and the snapshots up to date with them. The job
// runs in the Run's projector goroutine, while the next batch is already
// being written: its fsync and the projections of the batch before it
// overlap, which is most of what group commit gains.
//
// The process keeps the run lock (run.lock) from the first commit of a
// burst until the projector has caught up, so another process that takes
// the lock still finds every projection up to date with the log, as if
// each commit had projected before unlocking. Within the process, wmu
// keeps one writer of the log (or repair) at a time.
//
// While it keeps the lock, the process trusts what it wrote itself
// (lockEpoch): where the mailbox files end, and the agents' mail
// directories it has open. tasks.json is written when the lock is let go
// and at least every snapshotEvery events, not after every batch.
//
// By default an operation returns once its projections are done, as
// before; SetAsync lets it return as soon as its event is durable.

// A treeAct is an effect on the mail tree (state.Effect), as the
// projector carries it out.
type treeAct struct {
	state.Effect
	fresh bool // Deliver: the message was committed by this job, so no copy of it exists yet
	read  bool // Deliver: the copy is delivered read (its recipient saw it before it was projected)
}

// appendActs appends the effects to acts, marked fresh when they are a
// commit's own (no copy of their messages exists yet).
func appendActs(acts []treeAct, effects []state.Effect, fresh bool) []treeAct {
	for _, e := range effects {
		acts = append(acts, treeAct{Effect: e, fresh: fresh})
	}
	return acts
}

// knownCopies fills in the copy names of effects that its state did not
// know from side, the effects of the same event on a state that tracks
// the reader's messages: the two line up one for one, since the effects
// of an event differ between states only in the names they know.
func knownCopies(effects, side []state.Effect) []state.Effect {
	for i := range min(len(effects), len(side)) {
		for k, c := range effects[i].Seen {
			if !c.Known() && k < len(side[i].Seen) && side[i].Seen[k].ID == c.ID {
				effects[i].Seen[k] = side[i].Seen[k]
			}
		}
	}
	return effects
}

// copyName returns the file name of a copy, or its id when the name is
// not known (SetRead then looks for it by id).
func copyName(c state.Copy) string {
	if c.Known() {
		return mailName(c.SentAt, c.From, c.ID)
	}
	return c.ID
}

// mailName is mailbox.Name of a run message's copies.
func mailName(at events.Time, from, id string) string {
	return mailbox.Name(mailbox.Mail{Timestamp: at.Time, From: from, ID: id})
}

// A job is the projection work of one committed batch: the events (for the
// mailbox files), what they ask of the mail tree, and the snapshots as of
// its last event.
type job struct {
	evs    []*events.Event // committed events whose projections may be missing, in seq order
	acts   []treeAct
	before map[string]int64 // State.Files where projections stood before evs
	snap   *state.State     // the state after evs, tasks only (a copy)
	open   *state.State     // a copy of the whole state when open.jsonl is due, else nil
	done   chan struct{}
}

// projector runs the Run's projection jobs in order, in one goroutine
// started on demand.
type projector struct {
	mu      sync.Mutex
	cond    *sync.Cond // signalled when jobs finish
	jobs    []*job
	running bool
	pending int  // events in jobs not yet done
	broken  bool // a job failed: later jobs were skipped; reload before committing more
	async   bool
}

// maxPending bounds the events an asynchronous Run may have committed but
// not yet projected; a writer past it waits for the projector.
const maxPending = 4096

func (p *projector) init() {
	if p.cond == nil {
		p.cond = sync.NewCond(&p.mu)
	}
}

// SetAsync sets whether operations return as soon as their events are
// durable (true), or only once their projections (mailbox files, mail
// tree, snapshots) are written too (false, the default). With true, a
// long-lived leader commits its next operation while the projections of
// the last one are still being written; Sync waits for them. Either way
// the log is fsynced before an operation returns, and another process
// never sees projections behind the log while this one holds the run lock.
func (r *Run) SetAsync(on bool) {
	r.proj.mu.Lock()
	r.proj.async = on
	r.proj.mu.Unlock()
}

// Sync waits until the projections of every operation committed through
// r are written (see SetAsync).
func (r *Run) Sync() {
	p := &r.proj
	p.mu.Lock()
	p.init()
	for len(p.jobs) > 0 || p.running {
		p.cond.Wait()
	}
	p.mu.Unlock()
	r.hmu.Lock()
	r.flushSnapshot() // pending only while the lock is held; a failure leaves tasks.json behind, which readers replay
	r.hmu.Unlock()
}

// enqueue hands a job to the projector, which already holds a run-lock
// hold for it. With an asynchronous Run it first waits while too many
// events are waiting for projection.
func (r *Run) enqueue(j *job) {
	p := &r.proj
	p.mu.Lock()
	p.init()
	for p.async && p.pending > maxPending {
		p.cond.Wait()
	}
	p.jobs = append(p.jobs, j)
	p.pending += len(j.evs)
	if !p.running {
		p.running = true
		go r.projectLoop()
	}
	p.mu.Unlock()
}

// projectInline runs j in the calling goroutine, when the Run is
// synchronous and its projector idle: a lone operation (a crew command)
// then projects without handing over to another goroutine and back, which
// costs a process that does one operation more than the projection. It
// reports whether it ran j.
func (r *Run) projectInline(j *job) bool {
	p := &r.proj
	p.mu.Lock()
	p.init()
	if p.async || p.running || len(p.jobs) > 0 {
		p.mu.Unlock()
		return false
	}
	p.running = true
	broken := p.broken
	p.mu.Unlock()
	if !broken && r.runJobs([]*job{j}) != nil {
		broken = true
	}
	p.mu.Lock()
	p.broken = p.broken || broken
	close(j.done)
	p.cond.Broadcast()
	p.mu.Unlock()
	r.unhold()
	r.startQueued()
	return true
}

// startQueued starts the projector for jobs queued while an inline job
// ran, or marks it idle.
func (r *Run) startQueued() {
	p := &r.proj
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.jobs) > 0 {
		go r.projectLoop()
		return
	}
	p.running = false
	p.cond.Broadcast()
}

// isAsync reports whether operations return before their projections.
func (r *Run) isAsync() bool {
	r.proj.mu.Lock()
	defer r.proj.mu.Unlock()
	return r.proj.async
}

// projectLoop runs the queued jobs, all at once when several are
// waiting: their mail tree and mailbox files in order, then one snapshot
// for the last.
func (r *Run) projectLoop() {
	p := &r.proj
	for {
		p.mu.Lock()
		jobs := p.jobs
		p.jobs = nil
		if len(jobs) == 0 {
			p.running = false
			p.cond.Broadcast()
			p.mu.Unlock()
			return
		}
		broken := p.broken
		p.mu.Unlock()

		if !broken && r.runJobs(jobs) != nil {
			broken = true
		}
		p.mu.Lock()
		if broken {
			p.broken = true
		}
		for _, j := range jobs {
			p.pending -= len(j.evs)
			close(j.done)
		}
		p.cond.Broadcast()
		p.mu.Unlock()
		for range jobs {
			r.unhold()
		}
	}
}

// runJobs projects the jobs' events and checkpoints the snapshots of the
// last (tasks.json when due, open.jsonl when its job carries it).
// A projection that could not be written (a full disk, say) stops it
// before tasks.json moves past the events, so that the next writer replays
// them and projects them again (every step is idempotent).
func (r *Run) runJobs(jobs []*job) error {
	var (
		evs  []*events.Event
		acts []treeAct
		open *state.State
	)
	for _, j := range jobs {
		evs = append(evs, j.evs...)
		acts = append(acts, j.acts...)
		if j.open != nil {
			open = j.open
		}
	}
	last := jobs[len(jobs)-1]
	if err := r.project(acts, evs, last.snap.Files, jobs[0].before); ioFailure(err) {
		return err
	}
	if err := r.checkpoint(last.snap); err != nil {
		return err
	}
	if open != nil && r.writeOpenSnapshot(open) != nil {
		// commitBatch noted it as written; it is not: read the real one's
		// header next time, so it comes due again.
		r.openKnown.Store(false)
	}
	return nil
}

// hold takes the run lock for this process, or counts one more user of
// the lock it already holds; unhold gives one back, and the last unlocks.
func (r *Run) hold(ctx context.Context) error {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	if r.holds == 0 {
		fl, err := r.lock(ctx)
		if err != nil {
			return err
		}
		r.fl = fl
		r.held.forget() // another process may have written since this one let go
	}
	r.holds++
	return nil
}

func (r *Run) unhold() {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	if r.holds == 1 {
		// The lock is let go: tasks.json catches up first, so that the
		// next process to take it finds it current (and need not replay
		// and project again what this one did).
		r.flushSnapshot()
	}
	r.holds--
	if r.holds == 0 {
		r.held.forget()
		r.fl.Unlock()
		r.fl = nil
	}
}

// A lockEpoch is what a process knows of a run's files while it holds the
// run lock without letting go: no other process writes them meanwhile,
// so what it wrote itself is still what they hold. It is forgotten when
// the lock is let go (or a write fails, or repair rewrites the files).
type lockEpoch struct {
	// files is where each mailbox file ends (State.Files as last
	// projected), or nil when unknown.
	files map[string]int64
	// snapSeq is the seq of the state in tasks.json, when this process
	// wrote it (0: unknown); pending is a later state, written when it
	// is due, at Sync, or before the lock is let go.
	snapSeq int64
	pending *state.State
	// dirs are the agents' mailboxes opened by projections.
	dirs map[string]mailbox.AgentBox
}

// forget closes what e holds open and empties it.
func (e *lockEpoch) forget() {
	for _, d := range e.dirs {
		d.Close()
	}
	*e = lockEpoch{}
}

// snapshotEvery is how many events tasks.json may fall behind the log
// while a process keeps the run lock through a burst of commits: a reader
// replays at most that many events after it. A process that lets the
// lock go, or Syncs, writes it first.
const snapshotEvery = 128

// checkpoint writes st (the state after a projection job) to tasks.json
// when it is due, and otherwise keeps it to write later (lockEpoch).
func (r *Run) checkpoint(st *state.State) error {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	r.held.pending = st
	if r.held.snapSeq > 0 && st.Seq-r.held.snapSeq < snapshotEvery {
		return nil
	}
	return r.flushSnapshot()
}

// flushSnapshot writes the pending state, if any, to tasks.json. The
// caller holds hmu and the run lock.
func (r *Run) flushSnapshot() error {
	st := r.held.pending
	if st == nil {
		return nil
	}
	r.held.pending = nil
	if err := r.writeSnapshot(st); err != nil {
		r.held.snapSeq = 0
		return err
	}
	r.held.snapSeq = st.Seq
	return nil
}

// forgetFiles drops what this process knows of the run's files (see
// lockEpoch), after a write that failed or a repair: they are read again.
func (r *Run) forgetFiles() {
	r.hmu.Lock()
	r.held.files = nil
	r.hmu.Unlock()
}

// knownFiles returns where the mailbox files end, as this process last
// projected them while holding the lock, or nil when it does not know.
func (r *Run) knownFiles() map[string]int64 {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	return r.held.files
}

// noteFiles records where the mailbox files end after a projection.
func (r *Run) noteFiles(files map[string]int64) {
	r.hmu.Lock()
	r.held.files = maps.Clone(files)
	r.hmu.Unlock()
}

// exclusive runs fn as the only writer of the run, in this process and
// among processes: no commit, no projection job, the run lock held. Repair
// and mailbox healing use it.
func (r *Run) exclusive(fn func() error) error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	r.Sync()
	if err := r.hold(context.Background()); err != nil {
		return err
	}
	defer r.unhold()
	defer func() {
		r.hmu.Lock()
		r.held.forget() // fn rewrote files this process knew
		r.hmu.Unlock()
	}()
	return fn()
}

// openDue reports whether open.jsonl, last written at seq since with
// count open messages, should be written again for a state at seq: once
// the events after it would cost a reader more to replay than the
// snapshot costs to write (every 128 events, or one per four open
// messages when there are more).
func openDue(seq, since, count int64) bool {
	return seq-since >= 128+count/4
}

// openHeader is the first line of open.jsonl: which state it holds, and
// how many open messages, so that a writer can tell whether it is due
// without reading the rest.
type openHeader struct {
	Seq    int64 `json:"seq"`
	Offset int64 `json:"offset"`
	Open   int64 `json:"open"`
}

// openSnapshotState returns the seq and open-message count of open.jsonl
// as this process last read or wrote it, reading its first line if it has
// not (0, 0 when there is none).
func (r *Run) openSnapshotState() (seq, count int64) {
	if r.openKnown.Load() {
		return r.openSeq.Load(), r.openCount.Load()
	}
	var h openHeader
	if f, err := openSnapshot(r.path("open.jsonl")); err == nil {
		if l, err := jsonl.NewReader(f, 0, 1).Next(); err == nil {
			json.Unmarshal(l.Data, &h)
		}
		f.Close()
	}
	r.noteOpenSnapshot(h.Seq, h.Open)
	return h.Seq, h.Open
}

func (r *Run) noteOpenSnapshot(seq, count int64) {
	r.openSeq.Store(seq)
	r.openCount.Store(count)
	r.openKnown.Store(true)
}

// openLine is one line of open.jsonl after the first two: an open message
// and its key in State.Open.
type openLine struct {
	Key string `json:"key"`
	state.Open
}

// writeOpenSnapshot writes open.jsonl: a header (openHeader), the state's
// tasks as tasks.json holds them, then one open message per line, in seq
// order. Like tasks.json it is a projection, replaced atomically and not
// fsynced; unlike it, it is not rewritten on every commit (see openDue): a
// reader that needs the open messages reads it and replays the log after
// it.
func (r *Run) writeOpenSnapshot(st *state.State) error {
	err := writeAtomicFunc(r.path("open.jsonl"), r.root.Perm.File, false, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(openHeader{Seq: st.Seq, Offset: st.Offset, Open: int64(len(st.Open))}); err != nil {
			return err
		}
		if err := enc.Encode(st.CopyTasks()); err != nil {
			return err
		}
		keys := make([]string, 0, len(st.Open))
		for k := range st.Open {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			a, b := st.Open[keys[i]], st.Open[keys[j]]
			if a.Seq != b.Seq {
				return a.Seq < b.Seq
			}
			return keys[i] < keys[j]
		})
		for _, k := range keys {
			if err := enc.Encode(openLine{Key: k, Open: *st.Open[k]}); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		r.noteOpenSnapshot(st.Seq, int64(len(st.Open)))
	}
	return err
}

// readOpenSnapshot returns the whole state in open.jsonl when it matches
// the log, or an empty state. It keeps the open messages empty tracks
// (state.For: one participant's), and returns empty.Fresh() when there
// is no usable snapshot.
func (r *Run) readOpenSnapshot(empty *state.State) *state.State {
	fresh := empty.Fresh
	f, err := openSnapshot(r.path("open.jsonl"))
	if err != nil {
		return fresh()
	}
	defer f.Close()
	rd := jsonl.NewReader(f, 0, 1)
	var h openHeader
	if l, err := rd.Next(); err != nil || json.Unmarshal(l.Data, &h) != nil {
		return fresh()
	}
	l, err := rd.Next()
	if err != nil {
		return fresh()
	}
	st := fresh()
	st.Files = nil
	if json.Unmarshal(l.Data, st) != nil || st.Seq != h.Seq || st.Offset != h.Offset || !r.matchesLog(st) {
		return fresh()
	}
	st.Open = make(map[string]*state.Open, min(h.Open, 1<<20))
	n := int64(0)
	for {
		l, err := rd.Next()
		if err != nil {
			break // the end: the file was renamed into place whole
		}
		var ol openLine
		if json.Unmarshal(l.Data, &ol) != nil || ol.ID == "" || (ol.Key != ol.ID && ol.Key != state.Key(ol.ID, events.Broadcast, ol.Task)) {
			return fresh()
		}
		n++
		if !st.Tracks(ol.Task) {
			continue
		}
		o := ol.Open
		o.Task, o.Kind, o.File, o.Priority, o.Status, o.From = state.Intern(o.Task), state.Intern(o.Kind), state.Intern(o.File), state.Intern(o.Priority), state.Intern(o.Status), state.Intern(o.From)
		key := o.ID // the same string: one copy
		if ol.Key != o.ID {
			key = ol.Key
		}
		st.Open[key] = &o
	}
	if n != h.Open {
		return fresh() // cut short: not the file a writer renamed into place
	}
	r.noteOpenSnapshot(st.Seq, n)
	return st
}

// matchesLog reports whether a snapshot's seq and offset agree with the
// log: the line that ends at its offset has its seq. It also fills in
// what a snapshot from an older crew lacks.
func (r *Run) matchesLog(st *state.State) bool {
	if st.Seq <= 0 || st.Offset <= 0 || st.Files == nil {
		return false
	}
	f, err := os.Open(r.EventsPath())
	if err != nil {
		return false
	}
	defer f.Close()
	l, ok, err := jsonl.LineBefore(f, st.Offset)
	if err != nil || !ok {
		return false
	}
	if seq, ok := jsonl.SeqOf(l.Data); !ok || seq != st.Seq {
		return false
	}
	if st.Tasks == nil {
		st.Tasks = map[string]*state.Task{}
	}
	return true
}

func (p *projector) isBroken() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.broken
}
