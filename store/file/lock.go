package file

import (
	"context"
	"fmt"
	"maps"
	"os"

	"github.com/gofrs/flock"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/fsys"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/state"
)

// The run lock, and what a process knows while it holds it.
//
// run.lock is taken with flock(2) (gofrs/flock) by every writer of a
// run, for one commit batch or, while a process keeps writing, for a
// burst of them (hold/unhold count its users). While a process holds it
// no other process writes the run's files, so it may trust what it
// wrote itself (lockEpoch); after it let go, it checks first.

// lock takes the run lock (gofrs/flock on run.lock), waiting until ctx is
// done. run.lock must be a regular file: flock opens it with O_CREATE, so a
// link would be followed.
func (l *Log) lock(ctx context.Context) (*flock.Flock, error) {
	if fi, err := os.Lstat(l.path("run.lock")); err == nil && !fi.Mode().IsRegular() {
		// flock opens with O_CREATE: a link would be followed.
		return nil, fmt.Errorf("lock run %s: %s: %w", l.manifest.ID, l.path("run.lock"), fsys.ErrLink)
	}
	fl := flock.New(l.path("run.lock"))
	if ok, err := fl.TryLock(); err != nil {
		return nil, fmt.Errorf("lock run %s: %w", l.manifest.ID, err)
	} else if ok {
		return fl, nil
	}
	// Another process holds it: wait in flock(2), in a goroutine, so that
	// ctx (Ctrl-C) can end the wait.
	got := make(chan error, 1)
	go func() { got <- fl.Lock() }()
	select {
	case err := <-got:
		if err != nil {
			return nil, fmt.Errorf("lock run %s: %w", l.manifest.ID, err)
		}
		return fl, nil
	case <-ctx.Done():
		go func() {
			if <-got == nil {
				fl.Unlock() // taken after all: give it back
			}
		}()
		return nil, ctx.Err()
	}
}

// mailDir returns agent's mail directory, open: the one this process
// opened earlier (lockEpoch), checked first if the epoch went stale, or
// newly opened, the mailbox created if it has
// none, since a run message is delivered to every recipient. Different
// agents' directories may be used at once; one agent's by one goroutine
// at a time.
func (l *Log) mailDir(tree mailbox.Tree, agent string) (mailbox.AgentBox, error) {
	l.hmu.Lock()
	d := l.held.dirs[agent]
	if d == nil {
		d = l.held.suspectDirs[agent]
		delete(l.held.suspectDirs, agent)
		if d != nil && d.Moved() {
			d.Close()
			d = nil
		}
	}
	l.hmu.Unlock()
	if d == nil {
		box, err := mailbox.OpenCreating(tree, agent)
		if err != nil {
			return nil, err
		}
		d = box.(*mailbox.AgentDir) // Tree's boxes are (Tree.OpenAgent)
	}
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if l.held.dirs == nil {
		l.held.dirs = map[string]*mailbox.AgentDir{}
	}
	l.held.dirs[agent] = d
	return d, nil
}

// closeMailDir closes and forgets agent's mail directory, if mailDir
// holds it open.
func (l *Log) closeMailDir(agent string) {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if d := l.held.dirs[agent]; d != nil {
		d.Close()
		delete(l.held.dirs, agent)
	}
}

// hold takes the run lock for this process, or counts one more user of
// the lock it already holds.
func (l *Log) hold(ctx context.Context) error {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if l.holds == 0 {
		fl, err := l.lock(ctx)
		if err != nil {
			return err
		}
		l.fl = fl
	}
	l.holds++
	return nil
}

// unhold gives back one hold. The last one lets the lock go, after
// tasks.json has caught up, so that the next process to take it finds it
// current (and need not replay and project again what this one did).
// Other holds do not wait for a snapshot being written: a commit of this
// process may go on meanwhile (it then keeps the lock, and the last hold
// writes the snapshot again).
func (l *Log) unhold() {
	l.hmu.Lock()
	if l.holds > 1 {
		l.holds--
		l.hmu.Unlock()
		return
	}
	l.hmu.Unlock()
	// The last hold, it seems: no snapshot write may be in flight when
	// the lock goes (smu), and none left pending.
	l.smu.Lock()
	defer l.smu.Unlock()
	l.hmu.Lock()
	defer l.hmu.Unlock()
	for l.holds == 1 && l.held.pending != nil {
		l.hmu.Unlock()
		l.writePending()
		l.hmu.Lock()
	}
	l.holds--
	if l.holds == 0 {
		l.held.letGo() // another process may write meanwhile
		l.fl.Unlock()
		l.fl = nil
	}
}

// A lockEpoch is what a process knows of a run's files while it holds the
// run lock without letting go: no other process writes them meanwhile,
// so what it wrote itself is still what they hold. It is forgotten when
// a write fails or repair rewrites the files.
//
// When the lock is let go, another process may write the files, and
// while it is kept only for the snapshots of operations that have
// returned, a person (or a test) may still change them by hand: the
// epoch then goes stale (suspect), and what this process knows of
// tasks.json is dropped (letGo). Before the rest is trusted again,
// events.jsonl and each mailbox file are checked against what this
// process left (the same file, size, modification and change times: one
// lstat(2) each, sameVersion) and each mail directory against the one
// held open (AgentDir.Moved); the mailbox directory must still be a real
// directory, not a link to one. What changed is read or opened again:
// every write moves a file's change time, so another process's writes
// and changes by hand are seen (where the system gives no change time, a
// change by hand that keeps a file's size and modification time is not).
type lockEpoch struct {
	// files is where each mailbox file ends (State.Files as last
	// projected), or nil when unknown; stamps is each mailbox file as this
	// process last wrote or checked it, by file name.
	files  map[string]int64
	stamps map[string]os.FileInfo
	// stale: files must be checked against stamps before they are
	// trusted (knownFiles).
	stale bool
	// snapSeq is the seq of the state in tasks.json, when this process
	// wrote it (0: unknown); pending is a later state, written when it
	// is due, at Sync, or before the lock is let go.
	snapSeq int64
	pending *state.State
	// dirs are the agents' mailboxes opened by projections; suspectDirs
	// those opened before the epoch went stale, checked before used.
	dirs, suspectDirs map[string]*mailbox.AgentDir
	// log is the events.jsonl writer commits use, kept open, and logFI
	// the file as this process last wrote it; logStale: check it against
	// logFI before it is used again (writer).
	log      *events.Writer
	logFI    os.FileInfo
	logStale bool
}

// forget closes what e holds open and empties it.
func (e *lockEpoch) forget() {
	e.forgetFiles()
	e.forgetLog()
	*e = lockEpoch{}
}

// forgetFiles forgets where the mailbox files end and closes the mail
// directories, keeping what it knows of tasks.json (snapSeq, pending).
func (e *lockEpoch) forgetFiles() {
	for _, d := range e.dirs {
		d.Close()
	}
	for _, d := range e.suspectDirs {
		d.Close()
	}
	e.files, e.stamps, e.stale, e.dirs, e.suspectDirs = nil, nil, false, nil, nil
}

// forgetLog closes the kept events.jsonl writer.
func (e *lockEpoch) forgetLog() {
	if e.log != nil {
		e.log.Close()
	}
	e.log, e.logFI, e.logStale = nil, nil, false
}

// letGo is what becomes of e when the process lets the lock go: what it
// knows of tasks.json is dropped, and the rest goes stale.
func (e *lockEpoch) letGo() {
	e.snapSeq, e.pending = 0, nil
	e.suspect()
}

// suspect makes e stale: what it knows of the files is checked before
// it is used again.
func (e *lockEpoch) suspect() {
	e.stale = e.files != nil
	e.logStale = e.log != nil
	for agent, d := range e.dirs {
		if e.suspectDirs == nil {
			e.suspectDirs = map[string]*mailbox.AgentDir{}
		}
		e.suspectDirs[agent] = d
	}
	e.dirs = nil
}

// writer returns the events.jsonl writer for a commit, which holds the
// run lock: the one kept since this process's last commit in the same
// lock epoch (checked first, if the epoch went stale, to be the file
// this process left, unchanged: sameVersion), or
// newly opened (events.OpenWriter: a torn last line is cut); kept
// reports the first.
func (l *Log) writer() (w *events.Writer, kept bool, err error) {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	e := &l.held
	if e.log != nil && (e.logFI == nil || e.logStale && !unchanged(l.EventsPath(), e.logFI)) {
		e.forgetLog()
	}
	e.logStale = false
	if e.log != nil {
		return e.log, true, nil
	}
	if e.log, err = events.OpenWriter(l.EventsPath()); err != nil {
		return nil, false, err
	}
	return e.log, false, nil
}

// dropWriter closes the kept events.jsonl writer after a failed append:
// the next commit opens the log again, cutting what the failure left.
func (l *Log) dropWriter() {
	l.hmu.Lock()
	l.held.forgetLog()
	l.hmu.Unlock()
}

// unchanged reports whether the file at path is still was, what lstat(2)
// said of it when this process last wrote or checked it (sameVersion):
// no one changed it since.
func unchanged(path string, was os.FileInfo) bool {
	fi, err := os.Lstat(path)
	return err == nil && sameVersion(fi, was)
}

// forgetFiles drops what this process knows of the run's files (see
// lockEpoch), after a write that failed or a repair: they are read again.
func (l *Log) forgetFiles() {
	l.hmu.Lock()
	l.held.files, l.held.stamps, l.held.stale = nil, nil, false
	l.hmu.Unlock()
}

// knownFiles returns where the mailbox files end, as this process last
// projected them while holding the lock, or nil when it does not know
// (or one of them changed since, when the epoch is stale).
func (l *Log) knownFiles() map[string]int64 {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if l.held.stale {
		l.held.stale = false
		if realDir(l.path("mailbox")) != nil {
			// a link now (or gone): project's mkdir refuses it, rather
			// than writing through it to files that look unchanged
			l.held.files, l.held.stamps = nil, nil
			return nil
		}
		for _, file := range mailbox.Files {
			was := l.held.stamps[file]
			if was == nil || !unchanged(l.MailboxPath(file), was) {
				l.held.files, l.held.stamps = nil, nil
				break
			}
		}
	}
	return l.held.files
}

// noteFiles records where the mailbox files end after a projection, and
// each file as it is now (written names the files the projection wrote;
// the others are as they were when last noted, unless read is set).
func (l *Log) noteFiles(files map[string]int64, written map[string]bool, read bool) {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	stamps := l.held.stamps
	if stamps == nil || read {
		stamps = map[string]os.FileInfo{}
	}
	for _, file := range mailbox.Files {
		if stamps[file] != nil && !written[file] {
			continue
		}
		fi, err := os.Lstat(l.MailboxPath(file))
		if err != nil {
			l.held.files, l.held.stamps = nil, nil
			return
		}
		stamps[file] = fi
	}
	l.held.files, l.held.stamps = maps.Clone(files), stamps
}

// exclusive runs fn as the only writer of the run, in this process and
// among processes: no commit, no projection job, the run lock held. Repair
// and mailbox healing use it.
func (l *Log) exclusive(fn func() error) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.Sync()
	if err := l.hold(context.Background()); err != nil {
		return err
	}
	defer l.unhold()
	defer func() {
		l.hmu.Lock()
		l.held.forget() // fn rewrote files this process knew
		l.hmu.Unlock()
	}()
	return fn()
}
