package file

import (
	"bufio"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/fsys"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/state"
)

// Projections follow the log (docs/files.md, Write order): once a batch of events is fsynced,
// the operations are committed, and a projection job brings the mailbox
// files, the mail tree and the snapshots up to date with them. The job
// runs in the Log's projector goroutine, while the next batch is already
// being written: its fsync and the projections of the batch before it
// overlap, which is most of what group commit gains.
//
// The process keeps the run lock (run.lock) from the first commit of a
// burst until the projector has caught up, so another process that takes
// the lock still finds every projection up to date with the log, as if
// each commit had projected before unlocking. Within the process, the
// appender's turn keeps one writer of the log (or repair) at a time.
//
// While it keeps the lock, the process trusts what it wrote itself, and
// after it let go, checks it first (package doc, The lock epoch): where
// the log and the mailbox files end, and the agents' mail directories it
// has open. tasks.json is written at least every snapshotEvery events
// (whether or not the lock was let go between), and when due (tasksDue)
// once the Log has been idle snapshotIdle, at Sync and at Store.Close,
// not after every batch; the projection mark otherwise.
//
// By default an operation returns once its mailbox lines and mail tree
// are written, and its snapshots follow (the lock kept until they are
// written); SetAsync lets it return as soon as its event is durable.

// project brings the projections up to date with events already committed:
// mailbox files, the mail tree, and the read flags in it. evs are the log's
// last events (those after the snapshot the writer loaded, then its own);
// before is State.Files as of the snapshot. Every step is idempotent (a
// mailbox line is appended only past the file's last seq; a mail file keeps
// its name), so replaying an event twice is harmless.
//
// Each mailbox file must end with the message st.Files names. One that ends
// between before and that is behind by some of evs, which are appended; one
// that is missing, damaged at its end, ahead of the log, or behind by more
// than evs hold (a line lost in a crash while tasks.json survived) is
// rebuilt from the log. Where each file ends is read from it, unless this
// process projected last and the file is unchanged since (knownFiles).
func (l *Log) project(acts []mailbox.Act, evs []*events.Event, files, before map[string]int64) error {
	lines := map[string][]events.Message{}
	for _, e := range evs {
		if m := e.Message; m != nil {
			lines[mailbox.FileFor(m)] = append(lines[mailbox.FileFor(m)], *m)
		}
	}
	treeErr := l.projectTree(acts)
	known := l.knownFiles() // nil unless this process projected last and the files are unchanged since
	if known == nil {
		if err := mkdir(l.path("mailbox"), l.store.Perm); err != nil {
			return errors.Join(treeErr, err) // e.g. a symbolic link: not written through
		}
	}
	var errs []error
	written := map[string]bool{}
	for _, file := range mailbox.Files {
		key := strings.TrimSuffix(file, ".jsonl")
		want := files[key]
		have, ok := known[key]
		var err, serr error
		if !ok && known == nil {
			have, err = mailbox.LastSeq(l.MailboxPath(file))
			_, serr = os.Lstat(l.MailboxPath(file))
		}
		switch {
		case err == nil && serr == nil && have == want:
			// up to date
		case err == nil && serr == nil && have >= before[key] && have < want:
			var add []events.Message
			for _, m := range lines[file] {
				if m.Seq > have {
					add = append(add, m)
				}
			}
			errs = append(errs, mailbox.Append(l.MailboxPath(file), l.store.Perm.File, add))
			written[file] = true
		case errors.Is(err, fsys.ErrLink):
			errs = append(errs, err) // tampered with: not read, written through, or mended (docs/files.md, Permissions)
		default:
			errs = append(errs, l.rebuildMailbox(file))
			written[file] = true
		}
	}
	if err := errors.Join(errs...); err != nil {
		l.proj.forgetEnds()
		return errors.Join(treeErr, err)
	}
	l.noteFiles(files, written, known == nil)
	return treeErr
}

// projectTree does what acts ask of the mail tree (mailbox.Project),
// through the agents' mail directories this process holds open
// (mailDir).
func (l *Log) projectTree(acts []mailbox.Act) error {
	tree := l.store.MailTree()
	open := func(agent string) (mailbox.AgentBox, error) { return l.mailDir(tree, agent) }
	var errs []error
	for _, part := range byAgents(acts, maxMailDirs) {
		errs = append(errs, mailbox.Project(part, open, l.closeMailDir))
		l.trimMailDirs()
	}
	return errors.Join(errs...)
}

// maxMailDirs bounds the mail directories a Log keeps open between
// projections (each holds a few file descriptors): a broadcast to ten
// thousand agents must not run the process out of them (EMFILE). A
// projection is carried out maxMailDirs agents at a time, and the
// directories held are closed after each part once there are more.
const maxMailDirs = 512

// byAgents splits acts into parts of at most n agents each, every
// agent's acts in one part, in their order (mailbox.Project relates an
// agent's acts to one another only).
func byAgents(acts []mailbox.Act, n int) [][]mailbox.Act {
	part := map[string]int{}
	var parts [][]mailbox.Act
	for _, a := range acts {
		k, ok := part[a.Agent]
		if !ok {
			k = len(part) / n
			part[a.Agent] = k
			if k == len(parts) {
				parts = append(parts, nil)
			}
		}
		parts[k] = append(parts[k], a)
	}
	return parts
}

// trimMailDirs closes the mail directories held open when there are more
// than maxMailDirs; the next projection opens again those it needs.
func (l *Log) trimMailDirs() {
	p := &l.proj
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.dirs) <= maxMailDirs {
		return
	}
	for agent, d := range p.dirs {
		d.Close()
		delete(p.dirs, agent)
	}
}

// rebuildMailbox rewrites one mailbox file from the log, streaming: its
// memory does not grow with the file.
func (l *Log) rebuildMailbox(file string) error {
	c, err := events.Read(l.EventsPath(), 0)
	if err != nil {
		return err
	}
	defer c.Close()
	return writeAtomicFunc(l.MailboxPath(file), l.store.Perm.File, false, func(w io.Writer) error {
		return c.Scan(nil, func(e *events.Event) error {
			if e.Message == nil || mailbox.FileFor(e.Message) != file {
				return nil
			}
			line, err := events.Marshal(e.Message)
			if err != nil {
				return nil
			}
			_, err = w.Write(line)
			return err
		})
	})
}

// writeAtomicFunc writes what fill writes (through a buffer, so that it
// need not be held in memory whole) to a hidden temporary file beside
// path and renames it over path; with sync, it fsyncs the file before
// and the directory after.
func writeAtomicFunc(path string, perm os.FileMode, sync bool, fill func(io.Writer) error) error {
	dir := filepath.Dir(path)
	f, err := fsys.CreateTemp(dir, "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	w := bufio.NewWriterSize(fsysWriter{f}, 64<<10)
	err = fill(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil && sync {
		err = fsys.SyncFile(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, perm)
	}
	if err == nil {
		err = fsys.RenameFile(tmp, path)
	}
	if err == nil && sync {
		err = syncDir(dir)
	}
	return err
}

// fsysWriter writes through fsys.Write, so that a test's injected fault
// reaches buffered writes too.
type fsysWriter struct{ f *os.File }

func (w fsysWriter) Write(b []byte) (int, error) { return fsys.Write(w.f, b) }

// A job is the projection work of one committed batch: the events (for the
// mailbox files), what they ask of the mail tree, and the snapshots as of
// its last event.
type job struct {
	evs    []*events.Event // committed events whose projections may be missing, in seq order
	acts   []mailbox.Act
	before map[string]int64 // State.Files where projections stood before evs
	snap   *state.State     // the state after evs, tasks only (a copy)
	open   *state.State     // a copy of the whole state when open.jsonl is due, else nil
	done   chan struct{}
}

// A projector writes a Log's mailbox lines and mail copies: it runs the
// projection jobs of committed batches in order, in one goroutine
// started on demand (or the committing one, projectInline), and knows,
// while the lock epoch lasts, where the mailbox files end and which mail
// directories it has open. Its lock is mu.
type projector struct {
	mu      sync.Mutex // guards the fields below
	cond    *sync.Cond // signalled when jobs finish
	jobs    []*job
	running bool
	backlog int  // events in jobs not yet done
	broken  bool // a job failed: later jobs were skipped; reload before committing more
	async   bool

	// files is where each mailbox file ends (State.Files as last
	// projected), or nil when unknown; stamps is each mailbox file as
	// this process last wrote or checked it, by file name; stale: the
	// lock epoch ended since, so files are checked against stamps before
	// they are trusted (knownFiles).
	files  map[string]int64
	stamps map[string]os.FileInfo
	stale  bool
	// dirs are the agents' mail directories projections opened;
	// suspectDirs those opened before the epoch ended, checked before
	// they are used (mailDir).
	dirs, suspectDirs map[string]*mailbox.AgentDir
}

// suspect ends the lock epoch for the projector: what it knows of the
// mailbox files and mail directories is checked before it is used
// again.
func (p *projector) suspect() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stale = p.files != nil
	for agent, d := range p.dirs {
		if p.suspectDirs == nil {
			p.suspectDirs = map[string]*mailbox.AgentDir{}
		}
		p.suspectDirs[agent] = d
	}
	p.dirs = nil
}

// forget forgets where the mailbox files end and closes the mail
// directories, after a repair rewrote them.
func (p *projector) forget() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range p.dirs {
		d.Close()
	}
	for _, d := range p.suspectDirs {
		d.Close()
	}
	p.files, p.stamps, p.stale, p.dirs, p.suspectDirs = nil, nil, false, nil, nil
}

// forgetEnds forgets where the mailbox files end, after a write to them
// failed: they are read again. The mail directories stay open.
func (p *projector) forgetEnds() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.files, p.stamps, p.stale = nil, nil, false
}

// knownFiles returns where the mailbox files end, as this process last
// projected them while holding the lock, or nil when it does not know
// (or one of them changed since, when the epoch ended).
func (l *Log) knownFiles() map[string]int64 {
	p := &l.proj
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stale {
		p.stale = false
		if realDir(l.path("mailbox")) != nil {
			// a link now (or gone): project's mkdir refuses it, rather
			// than writing through it to files that look unchanged
			p.files, p.stamps = nil, nil
			return nil
		}
		for _, file := range mailbox.Files {
			was := p.stamps[file]
			if was == nil || !unchanged(l.MailboxPath(file), was) {
				p.files, p.stamps = nil, nil
				break
			}
		}
	}
	return p.files
}

// noteFiles records where the mailbox files end after a projection, and
// each file as it is now (written names the files the projection wrote;
// the others are as they were when last noted, unless read is set).
func (l *Log) noteFiles(files map[string]int64, written map[string]bool, read bool) {
	p := &l.proj
	p.mu.Lock()
	defer p.mu.Unlock()
	stamps := p.stamps
	if stamps == nil || read {
		stamps = map[string]os.FileInfo{}
	}
	for _, file := range mailbox.Files {
		if stamps[file] != nil && !written[file] {
			continue
		}
		fi, err := os.Lstat(l.MailboxPath(file))
		if err != nil {
			p.files, p.stamps = nil, nil
			return
		}
		stamps[file] = fi
	}
	p.files, p.stamps = maps.Clone(files), stamps
}

// mailDir returns agent's mail directory, open: the one this process
// opened earlier, checked first if the epoch ended since, or newly
// opened, the mailbox created if it has none, since a run message is
// delivered to every recipient. Different agents' directories may be
// used at once; one agent's by one goroutine at a time.
func (l *Log) mailDir(tree mailbox.Tree, agent string) (mailbox.AgentBox, error) {
	p := &l.proj
	p.mu.Lock()
	d := p.dirs[agent]
	if d == nil {
		d = p.suspectDirs[agent]
		delete(p.suspectDirs, agent)
		if d != nil && d.Moved() {
			d.Close()
			d = nil
		}
	}
	p.mu.Unlock()
	if d == nil {
		box, err := mailbox.OpenCreating(tree, agent)
		if err != nil {
			return nil, err
		}
		d = box.(*mailbox.AgentDir) // Tree's boxes are (Tree.OpenAgent)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dirs == nil {
		p.dirs = map[string]*mailbox.AgentDir{}
	}
	p.dirs[agent] = d
	return d, nil
}

// closeMailDir closes and forgets agent's mail directory, if mailDir
// holds it open.
func (l *Log) closeMailDir(agent string) {
	p := &l.proj
	p.mu.Lock()
	defer p.mu.Unlock()
	if d := p.dirs[agent]; d != nil {
		d.Close()
		delete(p.dirs, agent)
	}
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
// durable (true), or only once their mailbox lines and mail tree are
// written too (false, the default; the snapshots follow, and Sync or
// Store.Close waits for them). With true, a
// long-lived leader commits its next operation while the projections of
// the last one are still being written; Sync waits for them. Either way
// the log is fsynced before an operation returns, and another process
// never sees projections behind the log while this one holds the run lock.
func (l *Log) SetAsync(on bool) {
	l.proj.mu.Lock()
	l.proj.async = on
	l.proj.mu.Unlock()
}

// Sync waits until the projections of every operation committed through
// l are written, snapshots included (see SetAsync).
func (l *Log) Sync() {
	p := &l.proj
	p.mu.Lock()
	p.init()
	for len(p.jobs) > 0 || p.running {
		p.cond.Wait()
	}
	p.mu.Unlock()
	l.flushSnapshot() // under the run lock (taken if need be); a failure leaves tasks.json behind, which readers replay
}

// enqueue hands a job to the projector, which already holds a run-lock
// hold for it. With an asynchronous Run it first waits while too many
// events are waiting for projection.
func (l *Log) enqueue(j *job) {
	p := &l.proj
	p.mu.Lock()
	p.init()
	for p.async && p.backlog > maxPending {
		p.cond.Wait()
	}
	p.jobs = append(p.jobs, j)
	p.backlog += len(j.evs)
	if !p.running {
		p.running = true
		l.store.background.add()
		go l.projectLoop()
	}
	p.mu.Unlock()
}

// projectInline writes j's mailbox lines and mail tree in the calling
// goroutine, when the Run is synchronous and its projector idle: a lone
// operation (a crew command) then projects without handing over to
// another goroutine and back, which costs a process that does one
// operation more than the projection. Its caller may return then; the
// snapshots follow in the background (snapshotJobs), the run lock held
// until they are written. It reports whether it ran j.
func (l *Log) projectInline(j *job) bool {
	p := &l.proj
	p.mu.Lock()
	p.init()
	if p.async || p.running || len(p.jobs) > 0 {
		p.mu.Unlock()
		return false
	}
	p.running = true
	p.backlog += len(j.evs)
	broken := p.broken
	p.mu.Unlock()
	jobs := []*job{j}
	if !broken && l.projectJobs(jobs) != nil {
		broken = true
		p.setBroken() // before the caller returns: its next commit starts again from tasks.json
	}
	l.suspectIfLast(jobs)
	close(j.done)
	l.store.background.add()
	go func() {
		defer l.store.background.done()
		l.finishJobs(jobs, broken)
		l.startQueued()
	}()
	return true
}

// startQueued starts the projector for jobs queued while an inline job
// ran, or marks it idle.
func (l *Log) startQueued() {
	p := &l.proj
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.jobs) > 0 {
		l.store.background.add()
		go l.projectLoop()
		return
	}
	p.running = false
	p.cond.Broadcast()
}

// isAsync reports whether operations return before their projections.
func (l *Log) isAsync() bool {
	l.proj.mu.Lock()
	defer l.proj.mu.Unlock()
	return l.proj.async
}

// projectLoop runs the queued jobs, all at once when several are
// waiting: their mail tree and mailbox files in order, then one snapshot
// for the last. A job's caller may return once its mailbox lines and
// mail tree are written.
func (l *Log) projectLoop() {
	defer l.store.background.done()
	p := &l.proj
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

		if !broken && l.projectJobs(jobs) != nil {
			broken = true
			p.setBroken() // before the callers return: their next commit starts again from tasks.json
		}
		l.suspectIfLast(jobs)
		for _, j := range jobs {
			close(j.done)
		}
		l.finishJobs(jobs, broken)
	}
}

// finishJobs checkpoints the snapshots of jobs whose projections were
// written (broken: they were not, or an earlier job's were not), marks
// the jobs done, and gives back their holds of the run lock.
func (l *Log) finishJobs(jobs []*job, broken bool) {
	if !broken && l.snapshotJobs(jobs) != nil {
		broken = true
	}
	p := &l.proj
	p.mu.Lock()
	p.broken = p.broken || broken
	for _, j := range jobs {
		p.backlog -= len(j.evs)
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	for range jobs {
		l.unhold()
	}
}

// projectJobs writes the jobs' mailbox lines and mail tree. A projection
// that could not be written (a full disk, say) stops the jobs before
// tasks.json or the projection mark moves past their events, so that the next writer replays
// them and projects them again (every step is idempotent).
func (l *Log) projectJobs(jobs []*job) error {
	var (
		evs  []*events.Event
		acts []mailbox.Act
	)
	for _, j := range jobs {
		evs = append(evs, j.evs...)
		acts = append(acts, j.acts...)
	}
	last := jobs[len(jobs)-1]
	if err := l.project(acts, evs, last.snap.Files, jobs[0].before); ioFailure(err) {
		return err
	}
	return nil
}

// snapshotJobs checkpoints the snapshots as of the last of the jobs:
// tasks.json when due, open.jsonl when a job carries it.
func (l *Log) snapshotJobs(jobs []*job) error {
	var open *state.State
	for _, j := range jobs {
		if j.open != nil {
			open = j.open
		}
	}
	if err := l.checkpoint(jobs[len(jobs)-1].snap); err != nil {
		return err
	}
	if open != nil && l.writeOpenSnapshot(open) != nil {
		// tail.Project noted it as written; it is not: read the real
		// one's header next time, so it comes due again.
		l.snap.openKnown.Store(false)
	}
	return nil
}

func (p *projector) setBroken() {
	p.mu.Lock()
	p.broken = true
	p.mu.Unlock()
}

func (p *projector) isBroken() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.broken
}
