package storetest_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gofrs/flock"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/natstest"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/store/file"
	natsstore "github.com/crew-dev/crew/store/nats"
	"github.com/crew-dev/crew/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m, dial) }

// The suite on both stores: the file store in a temporary directory
// (twice: a new Log per Open, and one kept per run, file.Store.KeepLogs,
// as crew's command line keeps them), and NATS JetStream on an embedded
// nats-server (JetStream on, its store in a temporary directory, a
// random loopback port).
func TestConformance(t *testing.T) {
	storetest.Run(t, stores)
}

// dial opens the store an address names: "file:DIR" (a state root),
// "filekept:DIR" (the same, keeping one Log per run) or "nats:URL".
func dial(ctx context.Context, addr string) (*run.Root, func(), error) {
	kind, where, _ := strings.Cut(addr, ":")
	switch kind {
	case "file", "filekept":
		root, err := run.Find(where, crew.PrivatePerm)
		if err != nil {
			return nil, nil, err
		}
		root.Store.(*file.Store).KeepLogs = kind == "filekept"
		return root, func() { root.Close() }, nil
	case "nats":
		s, err := natsstore.Dial(ctx, where, natsstore.Options{})
		if err != nil {
			return nil, nil, err
		}
		return run.NewRoot(s), func() { s.Close() }, nil
	}
	return nil, nil, fmt.Errorf("unknown store %q", addr)
}

// stores starts both stores, fresh, for one test.
func stores(t *testing.T) []storetest.Store {
	t.Helper()
	ctx := context.Background()
	dir, kept := t.TempDir(), t.TempDir()
	for _, d := range []string{dir, kept} {
		if _, err := run.Init(d, crew.PrivatePerm); err != nil {
			t.Fatal(err)
		}
	}
	srv := natstest.Server(t)
	var out []storetest.Store
	for _, s := range []storetest.Store{{Name: "file", Addr: "file:" + dir}, {Name: "file-kept", Addr: "filekept:" + kept}, {Name: "nats", Addr: "nats:" + srv.ClientURL()}} {
		root, closer, err := dial(ctx, s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(closer)
		s.Root = root
		switch st := root.Store.(type) {
		case *file.Store:
			s.AppendUnprojected = func(ctx context.Context, ev *events.Event) error { return appendFile(ctx, st, ev) }
		case *natsstore.Store:
			s.AppendUnprojected = func(ctx context.Context, ev *events.Event) error {
				return st.Append(ctx, ev, "unprojected-"+ev.Message.ID)
			}
		}
		out = append(out, s)
	}
	return out
}

// appendFile appends ev to its run's events.jsonl as a writer of the
// file store does before it projects anything: under the run lock, at
// the log's end (its last seq ev.Seq-1), with one write and an fsync.
func appendFile(ctx context.Context, s *file.Store, ev *events.Event) error {
	l, err := s.Open(ctx, ev.Run)
	if err != nil {
		return err
	}
	fl := flock.New(filepath.Join(l.Dir(), "run.lock"))
	if err := fl.Lock(); err != nil {
		return err
	}
	defer fl.Unlock()
	w, err := events.OpenWriter(l.(*file.Log).EventsPath())
	if err != nil {
		return err
	}
	defer w.Close()
	last, ok, err := w.Last()
	if err != nil {
		return err
	}
	if !ok || last.Seq != ev.Seq-1 {
		return fmt.Errorf("append seq %d to run %s: the log ends at seq %d: %w", ev.Seq, ev.Run, last.Seq, crew.ErrConflict)
	}
	line, err := events.Marshal(ev)
	if err != nil {
		return err
	}
	return w.AppendRaw(line)
}
