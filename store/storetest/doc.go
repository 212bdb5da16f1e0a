// Package storetest is the conformance suite every crew store passes, as
// hashicorp/raft's LogStore tests are for its stores: the file store
// (store/file) and the NATS JetStream store (store/nats) run it, and a
// third store would run it too.
//
// It tests a store at two levels. Through store.Store and store.Log
// (log.go): runs created whole, with ids refused in any other letter case
// (docs/concepts.md, Identifiers); seq dense from 1 and cursors on it;
// many processes committing at once, of which exactly one wins a
// contested change while every writer's own order is kept
// (docs/guarantees.md, 3); waiters woken by another process's commit.
// And through the operations of package run on a root of the store
// (run.go): every transition of docs/state-machine.md from every state,
// delivery status and cursors, the per-agent mail tree
// (docs/mail-tree.md), bad input, the race where many respond at once,
// waiting and wake-up, a lost mail copy delivered by the next writer.
// Racing and concurrent writers are real processes: the test binary
// started again in a helper mode, which opens the store by its address.
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
//			root, closer, err := dial(context.Background(), "mine:"+srv.URL())
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(closer)
//			return []storetest.Store{{Name: "mine", Addr: "mine:" + srv.URL(), Root: root}}
//		})
//	}
//
//	// dial opens the store addr names, for the tests and their helpers.
//	func dial(ctx context.Context, addr string) (*run.Root, func(), error) { … }
//
// storetest_test.go in this directory is that wiring for the file store
// and for NATS on an embedded nats-server.
package storetest
