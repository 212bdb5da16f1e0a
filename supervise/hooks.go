package supervise

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"

	"github.com/crew-dev/crew/run"
)

// What this machine knows of a participant's agent hooks, kept beside
// its heartbeat in the run's workers directory (run.Run.WorkersDir):
// PARTICIPANT.hook, whose modification time is the last call of one of
// its agent's hooks (crew hook AGENT EVENT), and PARTICIPANT.wait,
// locked (flock(2)) while a wait hook (crew hook claude wait) waits for
// its mail. A participant is a task id, or run.Leader. Package app reads
// them to tell why a message sent to a worker was not delivered
// (app.Undelivered).

// hookFile is participant's hook-call file.
func hookFile(dir, participant string) string { return filepath.Join(dir, participant+".hook") }

// waitFile is participant's wait-hook lock file.
func waitFile(dir, participant string) string { return filepath.Join(dir, participant+".wait") }

// HookCalled records that one of participant's agent hooks was called
// now: best effort (an error is dropped), as Alive.
func HookCalled(r *run.Run, participant string) {
	dir, err := r.WorkersDir(false)
	if err != nil {
		return
	}
	path := hookFile(dir, participant)
	if err := touch(path, time.Now()); !errors.Is(err, os.ErrNotExist) {
		return
	}
	if dir, err = r.WorkersDir(true); err != nil {
		return
	}
	if f, err := createFile(r, hookFile(dir, participant)); err == nil {
		f.Close()
	}
}

// LastHook is when one of participant's agent hooks was last called on
// this machine (HookCalled), zero if never.
func LastHook(r *run.Run, participant string) time.Time {
	dir, err := r.WorkersDir(false)
	if err != nil {
		return time.Time{}
	}
	fi, err := os.Stat(hookFile(dir, participant))
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// Waiting records that a wait hook waits for participant's mail, until
// release is called (or the process ends: the lock goes with it).
func Waiting(r *run.Run, participant string) (release func(), err error) {
	dir, err := r.WorkersDir(true)
	if err != nil {
		return nil, err
	}
	f, err := createFile(r, waitFile(dir, participant))
	if err != nil {
		return nil, err
	}
	f.Close()
	l := flock.New(waitFile(dir, participant))
	if _, err := l.TryLock(); err != nil {
		return nil, err
	}
	return func() { l.Unlock() }, nil
}

// HasWaiter reports whether a wait hook waits for participant's mail on
// this machine now (Waiting).
func HasWaiter(r *run.Run, participant string) bool {
	dir, err := r.WorkersDir(false)
	if err != nil {
		return false
	}
	path := waitFile(dir, participant)
	if _, err := os.Stat(path); err != nil {
		return false
	}
	l := flock.New(path)
	ok, err := l.TryRLock()
	if err != nil {
		return false
	}
	if ok {
		l.Unlock()
		return false
	}
	return true
}
