package run

import (
	"io"
	"testing"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
)

// newTestRun creates a state root in a temporary directory and a run "r1"
// in it.
func newTestRun(t *testing.T) *Run {
	t.Helper()
	dir := t.TempDir()
	root, err := Init(dir, crew.PrivatePerm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() }) // snapshots still being written, before TempDir goes
	r, err := root.Create(CreateOptions{ID: "r1", Title: "test", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// must fails the test on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// logEvents reads the whole log, failing on any damage.
func logEvents(t *testing.T, r *Run) []events.Event {
	t.Helper()
	c, err := r.Events(0)
	must(t, err)
	defer c.Close()
	var evs []events.Event
	for {
		e, err := c.Next()
		if err == io.EOF {
			return evs
		}
		must(t, err)
		evs = append(evs, e)
	}
}
