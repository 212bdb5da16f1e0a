package supervise

import (
	"testing"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/run"
)

// newTestRun creates a state root in a temporary directory and a run "r1"
// in it.
func newTestRun(t *testing.T) *run.Run {
	t.Helper()
	dir := t.TempDir()
	root, err := run.Init(dir, crew.PrivatePerm)
	must(t, err)
	t.Cleanup(func() { root.Close() }) // snapshots still being written, before TempDir goes
	r, err := root.Create(run.CreateOptions{ID: "r1", Title: "test", Dir: dir})
	must(t, err)
	return r
}

// must fails the test on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
