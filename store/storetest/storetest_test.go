package storetest_test

import (
	"testing"

	"github.com/crew-dev/crew/internal/teststores"
	"github.com/crew-dev/crew/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m, teststores.Dial) }

// The suite on both stores (internal/teststores): the file store in a
// temporary directory (twice: a new Log per Open, and one kept per run,
// file.Store.KeepLogs, as crew's command line keeps them), and NATS
// JetStream on an embedded nats-server.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) []storetest.Store {
		var out []storetest.Store
		for _, s := range teststores.Start(t) {
			out = append(out, storetest.Store{Name: s.Name, Addr: s.Addr, Store: s.Store})
		}
		return out
	})
}
