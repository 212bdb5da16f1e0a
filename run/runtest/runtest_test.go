package runtest_test

import (
	"context"
	"testing"

	"github.com/crew-dev/crew/internal/teststores"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/run/runtest"
)

func TestMain(m *testing.M) { runtest.Main(m, dial) }

// dial opens a root on the store an address names (teststores.Dial).
func dial(ctx context.Context, addr string) (*run.Root, func(), error) {
	s, closer, err := teststores.Dial(ctx, addr)
	if err != nil {
		return nil, nil, err
	}
	return run.NewRoot(s), closer, nil
}

// The suite on both stores (internal/teststores): the file store in a
// temporary directory (twice: a new Log per Open, and one kept per run,
// file.Store.KeepLogs, as crew's command line keeps them), and NATS
// JetStream on an embedded nats-server.
func TestConformance(t *testing.T) {
	runtest.Run(t, func(t *testing.T) []runtest.Store {
		var out []runtest.Store
		for _, s := range teststores.Start(t) {
			out = append(out, runtest.Store{Name: s.Name, Addr: s.Addr, Root: run.NewRoot(s.Store), AppendUnprojected: s.AppendUnprojected})
		}
		return out
	})
}
