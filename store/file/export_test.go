package file

import (
	"context"

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
