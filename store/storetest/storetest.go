package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/crew-dev/crew/internal/proctest"
	"github.com/crew-dev/crew/store"
)

// Store is one store under test.
type Store struct {
	// Name names the store in subtest names ("file", "nats").
	Name string
	// Addr is the address the Dialer given to Main opens the same store
	// at, in a helper process.
	Addr string
	// Store is the store, as the Dialer opened it.
	Store store.Store
}

// Dialer opens the store addr names and returns it and a function that
// closes it. Helper processes reopen a Store by its Addr with it.
type Dialer func(ctx context.Context, addr string) (s store.Store, close func(), err error)

// Main is for a TestMain: when the process was started as one of the
// suite's helper processes, it opens the store with dial, does the
// helper's work (logHelper) and exits; otherwise it runs the tests
// (m.Run) and exits with their code.
func Main(m *testing.M, dial Dialer) {
	proctest.Main(m, func(ctx context.Context, spec proctest.Spec) int {
		s, closer, err := dial(ctx, spec.Addr)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		defer closer()
		return logHelper(ctx, s, spec)
	})
}

// A test is one conformance test, run on one store.
type test struct {
	name string
	f    func(t *testing.T, s Store)
}

// tests are the conformance tests, in the order Run runs them.
var tests = []test{
	{"Create", testCreate},
	{"CommitKeepsSeqDense", testCommitKeepsSeqDense},
	{"CommitRefusesAndCancels", testCommitRefusesAndCancels},
	{"CursorsReadFromAnySeq", testCursorsReadFromAnySeq},
	{"RaceExactlyOneWins", testRaceExactlyOneWins},
	{"ConcurrentWritersDense", testConcurrentWritersDense},
	{"WatchWakes", testWatchWakes},
	{"WatchParticipants", testWatchParticipants},
}

// Run runs every conformance test as a subtest (TestX/Create/file), on
// each of the stores that stores starts, fresh, for that test (it
// cleans them up with t.Cleanup). The test binary's TestMain must call
// Main.
func Run(t *testing.T, stores func(t *testing.T) []Store) {
	proctest.Ready(t)
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			for _, s := range stores(t) {
				t.Run(s.Name, func(t *testing.T) { c.f(t, s) })
			}
		})
	}
}
