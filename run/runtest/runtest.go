// Package runtest is the operation-level conformance suite: package
// run's operations on a root of each store, as store/storetest is the
// suite of the store interface below it. The file store and the NATS
// JetStream store run it (runtest_test.go), and a third store would run
// it too.
//
// It tests every transition of docs/state-machine.md from every state,
// delivery status and cursors, the per-agent mail tree
// (docs/mail-tree.md), bad input, the race where many respond at once,
// concurrent writers, waiting and wake-up, a lost mail copy
// delivered by the next writer, and crew's failure messages to the
// leader. Racing and concurrent writers are real
// processes (internal/proctest): the test binary started again in a
// helper mode, which opens the store by its address.
//
// A store's tests run the suite with a TestMain that calls Main, given
// a Dialer that opens a root on the store an address names, and a test
// that calls Run, given a function that starts the stores fresh for each
// test:
//
//	func TestMain(m *testing.M) { runtest.Main(m, dial) }
//
//	func TestConformance(t *testing.T) {
//		runtest.Run(t, func(t *testing.T) []runtest.Store { … })
//	}
package runtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/proctest"
	"github.com/crew-dev/crew/run"
)

// Store is one store under test.
type Store struct {
	// Name names the store in subtest names ("file", "nats").
	Name string
	// Addr is the address the Dialer given to Main opens the same store
	// at, in a helper process.
	Addr string
	// Root is a root on the store, as the Dialer opened it.
	Root *run.Root
	// AppendUnprojected, when set, appends ev (seq, run and time set; seq
	// the log's head+1) to its run's log as a writer that dies right
	// after its append would leave it: the event durable, none of its
	// projections (mail-tree copies) written. The test that the next
	// writer delivers them needs it, and is skipped without it.
	AppendUnprojected func(ctx context.Context, ev *events.Event) error
}

// Dialer opens a root on the store addr names and returns it and a
// function that closes it. Helper processes reopen a Store by its Addr
// with it.
type Dialer func(ctx context.Context, addr string) (root *run.Root, close func(), err error)

// Main is for a TestMain: when the process was started as one of the
// suite's helper processes, it opens the root with dial, does the
// helper's work (runHelper) and exits; otherwise it runs the tests
// (m.Run) and exits with their code.
func Main(m *testing.M, dial Dialer) {
	proctest.Main(m, func(ctx context.Context, spec proctest.Spec) int {
		root, closer, err := dial(ctx, spec.Addr)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		defer closer()
		return runHelper(ctx, root, spec)
	})
}

// A test is one conformance test, run on one store.
type test struct {
	name string
	f    func(t *testing.T, s Store)
}

// tests are the conformance tests, in the order Run runs them.
var tests = []test{
	{"RunTransitions", testRunTransitions},
	{"RunMessagesAndTerminalTasks", testRunMessagesAndTerminalTasks},
	{"RunInboxCursorsAndDeliveryStatus", testRunInboxCursorsAndDeliveryStatus},
	{"RunBadInput", testRunBadInput},
	{"RunMailTree", testRunMailTree},
	{"RunLostCopyIsDeliveredByTheNextWriter", testRunLostCopyIsDeliveredByTheNextWriter},
	{"RunRespondRaceExactlyOneWins", testRunRespondRaceExactlyOneWins},
	{"RunConcurrentWriters", testRunConcurrentWriters},
	{"RunAskWaitIsWoken", testRunAskWaitIsWoken},
	{"RunLeaderIsTold", testRunLeaderIsTold},
}

// Run runs every conformance test as a subtest (TestX/RunTransitions/file),
// on each of the stores that stores starts, fresh, for that test (it
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
