// Package storetest is the conformance suite of the store interface
// (package store), as hashicorp/raft's LogStore tests are for its
// stores: the file store (store/file) and the NATS JetStream store
// (store/nats) run it, and a third store would run it too. It imports
// package store and nothing above it; the suite of the operations on a
// root of a store, one layer up, is run/runtest.
//
// It tests a store through store.Store and store.Log (log.go): runs
// created whole, with ids refused in any other letter case
// (docs/concepts.md, Identifiers); seq dense from 1, refused and
// cancelled changes taking no seq, and cursors on it; many processes
// committing at once, of which exactly one wins a contested change while
// every writer's own order is kept (docs/guarantees.md, 3); waiters woken
// by another process's commit. Racing and concurrent writers are real
// processes (internal/proctest): the test binary started again in a
// helper mode, which opens the store by its address.
//
// A store's tests run the suite with a TestMain that calls Main, given
// a Dialer that opens the store an address names (helper processes reach
// the store that way), and a test that calls Run, given a function that
// starts the stores fresh for each test:
//
//	func TestMain(m *testing.M) { storetest.Main(m, dial) }
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) []storetest.Store {
//			srv := startServer(t) // cleaned up by t
//			s, closer, err := dial(context.Background(), "mine:"+srv.URL())
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(closer)
//			return []storetest.Store{{Name: "mine", Addr: "mine:" + srv.URL(), Store: s}}
//		})
//	}
//
//	// dial opens the store addr names, for the tests and their helpers.
//	func dial(ctx context.Context, addr string) (store.Store, func(), error) { … }
//
// storetest_test.go in this directory is that wiring for the file store
// and for NATS on an embedded nats-server (internal/teststores).
package storetest
