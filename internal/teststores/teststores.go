// Package teststores starts the stores crew's conformance suites run
// on (store/storetest, run/runtest), fresh for each test: the file store
// in a temporary directory, twice (a new Log per Open, and one kept per
// run, file.Store.KeepLogs, as crew's command line keeps them), and NATS
// JetStream on an embedded nats-server (internal/natstest). A store is
// named by an address that a helper process opens again (Dial).
package teststores

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gofrs/flock"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/natstest"
	"github.com/crew-dev/crew/store"
	"github.com/crew-dev/crew/store/file"
	natsstore "github.com/crew-dev/crew/store/nats"
)

// A Started is one store started for a test.
type Started struct {
	Name  string // "file", "file-kept", "nats"
	Addr  string // what Dial opens it by
	Store store.Store
	// AppendUnprojected appends ev (seq, run and time set; seq the log's
	// head+1) to its run's log as a writer that dies right after its
	// append would leave it: the event durable, none of its projections
	// written.
	AppendUnprojected func(ctx context.Context, ev *events.Event) error
}

// Dial opens the store an address names: "file:DIR" (a state root),
// "filekept:DIR" (the same, keeping one Log per run) or "nats:URL"
// ("nats:URL,creds=FILE" with authorization, CREW_TEST_NATS_AUTH), and
// returns it and a function that closes it.
func Dial(ctx context.Context, addr string) (store.Store, func(), error) {
	kind, where, _ := strings.Cut(addr, ":")
	switch kind {
	case "file", "filekept":
		s, err := file.Find(where, crew.PrivatePerm)
		if err != nil {
			return nil, nil, err
		}
		s.KeepLogs = kind == "filekept"
		return s, func() { s.Close() }, nil
	case "nats":
		url, creds, _ := strings.Cut(where, ",creds=")
		s, err := natsstore.Dial(ctx, url, natsstore.Options{Creds: creds})
		if err != nil {
			return nil, nil, err
		}
		return s, func() { s.Close() }, nil
	}
	return nil, nil, fmt.Errorf("unknown store %q", addr)
}

// Start starts every store, fresh, for one test; t cleans them up.
func Start(t *testing.T) []Started {
	t.Helper()
	ctx := context.Background()
	dir, kept := t.TempDir(), t.TempDir()
	for _, d := range []string{dir, kept} {
		s, err := file.Init(d, crew.PrivatePerm)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	natsAddr := ""
	if os.Getenv(AuthEnv) != "" {
		srv, creds, err := AuthServer(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Shutdown)
		natsAddr = "nats:" + srv.ClientURL() + ",creds=" + creds
	} else {
		natsAddr = "nats:" + natstest.Server(t).ClientURL()
	}
	var out []Started
	for _, s := range []Started{{Name: "file", Addr: "file:" + dir}, {Name: "file-kept", Addr: "filekept:" + kept}, {Name: "nats", Addr: natsAddr}} {
		st, closer, err := Dial(ctx, s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(closer)
		s.Store = st
		switch st := st.(type) {
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
	w, err := events.OpenWriter(filepath.Join(l.Dir(), "events.jsonl"))
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
