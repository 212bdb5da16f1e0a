package file

import (
	"context"
	"fmt"
	"os"

	"github.com/gofrs/flock"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/fsys"
)

// The run lock: run.lock, taken with flock(2) (gofrs/flock) by every
// writer of a run, for one commit batch or, while a process keeps
// writing, for a burst of them (hold/unhold count its users). While a
// process holds it no other process writes the run's files, so it may
// trust what it wrote itself; when it lets go the lock epoch ends, and it
// checks first (package doc, The lock epoch).

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

// hold takes the run lock for this process, or counts one more user of
// the lock it already holds. A caller that may take it (no other user)
// holds the appender's turn, so that no other goroutine of this process
// takes it meanwhile; the wait for flock(2) is outside the appender's
// lock, so operations queue up for the next batch meanwhile.
func (l *Log) hold(ctx context.Context) error { return l.holdFor(ctx, false) }

// holdFor is hold; snap says the hold is flushSnapshot's (counted in
// snapHolds too).
func (l *Log) holdFor(ctx context.Context, snap bool) error {
	a := &l.app
	n := 0
	if snap {
		n = 1
	}
	a.mu.Lock()
	if a.holds > 0 {
		a.holds++
		a.snapHolds += n
		a.mu.Unlock()
		return nil
	}
	a.mu.Unlock()
	fl, err := l.lock(ctx)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.fl = fl
	a.holds++
	a.snapHolds += n
	a.mu.Unlock()
	return nil
}

// unhold gives back one hold. The last one lets the lock go, once no
// snapshot write is in flight. tasks.json is not brought up to date
// first: it is written every snapshotEvery events whether or not the
// lock was let go between, and a state it still owes is kept (with the
// Store, which writes it once the Log has been idle snapshotIdle, or at
// Close), so that a process that commits once per lock epoch, back to
// back, does not rewrite it every time. The next process to
// take the lock replays the events after it (and projects them again,
// idempotently, after the seq the projection mark or tasks.json says
// projections got to).
//
// Lock order: the snapshotter's, then the appender's, then the
// projector's.
func (l *Log) unhold() { l.unholdFor(false) }

// unholdFor is unhold; snap says the hold is flushSnapshot's.
func (l *Log) unholdFor(snap bool) {
	a, s := &l.app, &l.snap
	n := 0
	if snap {
		n = 1
	}
	a.mu.Lock()
	if a.holds > 1 {
		a.holds--
		a.snapHolds -= n
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()
	// The last hold, it seems: no snapshot write may be in flight when
	// the lock goes (the snapshotter's lock).
	s.mu.Lock()
	defer s.mu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.holds--
	a.snapHolds -= n
	if a.holds == 0 {
		// Another process may write meanwhile: the epoch ends (package
		// doc, The lock epoch).
		s.endEpoch()
		if s.pending != nil {
			l.store.owe(l)
		}
		a.wStale = a.w != nil
		l.proj.suspect()
		a.fl.Unlock()
		a.fl = nil
	}
}

// suspectIfLast ends the lock epoch when jobs hold the run lock alone
// (no commit under way, no job queued; a hold of flushSnapshot, which
// writes only tasks.json, does not count): the lock is kept past their
// callers' return only for the snapshots, and as if it had been let go,
// the next operation checks the log, the mailbox files and the mail
// directories before it trusts what it knows of them, and so sees a
// change made to them meanwhile (a mail directory removed is created
// again). What it knows of tasks.json it keeps: it writes it itself.
func (l *Log) suspectIfLast(jobs []*job) {
	a := &l.app
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.holds-a.snapHolds == len(jobs) {
		a.wStale = a.w != nil
		l.proj.suspect()
	}
}

// writer returns the events.jsonl writer for a commit, which holds the
// run lock: the one kept since this process's last commit (checked
// first, when the epoch ended since, to be the file this process left,
// unchanged: sameVersion), or newly opened (events.OpenWriter: a torn
// last line is cut); kept reports the first.
func (l *Log) writer() (w *events.Writer, kept bool, err error) {
	a := &l.app
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.w != nil && (a.wFI == nil || a.wStale && !unchanged(l.EventsPath(), a.wFI)) {
		a.forgetWriter()
	}
	a.wStale = false
	if a.w != nil {
		return a.w, true, nil
	}
	if a.w, err = events.OpenWriter(l.EventsPath()); err != nil {
		return nil, false, err
	}
	return a.w, false, nil
}

// forgetWriter closes the kept events.jsonl writer. The caller holds
// a.mu.
func (a *appender) forgetWriter() {
	if a.w != nil {
		a.w.Close()
	}
	a.w, a.wFI, a.wStale = nil, nil, false
}

// dropWriter closes the kept events.jsonl writer after a failed append:
// the next commit opens the log again, cutting what the failure left.
func (l *Log) dropWriter() {
	l.app.mu.Lock()
	l.app.forgetWriter()
	l.app.mu.Unlock()
}

// unchanged reports whether the file at path is still was, what lstat(2)
// said of it when this process last wrote or checked it (sameVersion):
// no one changed it since.
func unchanged(path string, was os.FileInfo) bool {
	fi, err := os.Lstat(path)
	return err == nil && sameVersion(fi, was)
}

// exclusive runs fn as the only writer of the run, in this process and
// among processes: no commit, no projection job, the run lock held. Repair
// and mailbox healing use it. fn rewrites files this process knew, so
// all it knew of them is forgotten before the lock is let go.
func (l *Log) exclusive(fn func() error) error {
	l.app.turn.Lock()
	defer l.app.turn.Unlock()
	l.Sync()
	if err := l.hold(context.Background()); err != nil {
		return err
	}
	defer l.unhold()
	defer func() {
		l.app.mu.Lock()
		l.app.forgetWriter()
		l.app.mu.Unlock()
		l.proj.forget()
		l.snap.mu.Lock()
		l.snap.forget()
		l.snap.mu.Unlock()
	}()
	return fn()
}
