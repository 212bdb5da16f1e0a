package file

import (
	"context"
	"time"

	"github.com/crew-dev/crew/state"
)

// What the tests of package file_test reach inside a Log.

var SealJSON = sealJSON

const SnapshotEvery = snapshotEvery

func (l *Log) ReadSnapshot() *state.State       { return l.readSnapshot() }
func (l *Log) Checkpoint(st *state.State) error { return l.checkpoint(st) }
func (l *Log) Hold(ctx context.Context) error {
	l.app.turn.Lock() // as a commit batch holds it
	defer l.app.turn.Unlock()
	return l.hold(ctx)
}
func (l *Log) Unhold()                               { l.unhold() }
func (l *Log) OpenSnapshotState() (seq, count int64) { return l.openSnapshotState() }

// SetSnapshotIdle sets how long a Log waits, idle, before it writes the
// tasks.json it owes, until the test ends.
func SetSnapshotIdle(t interface{ Cleanup(func()) }, d time.Duration) {
	was := snapshotIdle
	snapshotIdle = d
	t.Cleanup(func() { snapshotIdle = was })
}

// SetHandOverHook has hook called, until the test ends, each time a
// committed batch's projection job is about to be handed to the
// projector.
func SetHandOverHook(t interface{ Cleanup(func()) }, hook func()) {
	testHookHandOver = hook
	t.Cleanup(func() { testHookHandOver = nil })
}

// SetSnapshotOpenedHook has hook called, until the test ends, each time
// a reader of tasks.json has opened it, before it reads it.
func SetSnapshotOpenedHook(t interface{ Cleanup(func()) }, hook func()) {
	testHookSnapshotOpened = hook
	t.Cleanup(func() { testHookSnapshotOpened = nil })
}

func TasksDue(behind int64, n int) bool { return tasksDue(behind, n) }
