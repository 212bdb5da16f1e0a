// --store and the NATS flags (global): runs kept on NATS JetStream
// instead of under a .crew directory.

package main

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew/run"
)

// Store flags: where runs live when not under a .crew directory (docs/nats.md).
// Global, like --dir: accepted before or after the command name.
var storeFlags = []cli.Flag{
	&cli.StringFlag{Name: "store", Usage: "keep runs and mail on NATS JetStream at `URL` (nats://HOST:PORT[,HOST:PORT...]) instead of under a .crew directory", EnvVars: []string{"CREW_STORE"}},
	&cli.StringFlag{Name: "nats-creds", Usage: "NATS credentials `FILE` (user JWT and nkey seed; never printed)", EnvVars: []string{"CREW_NATS_CREDS"}},
	&cli.StringFlag{Name: "nats-tls-ca", Usage: "PEM `FILE` of the authorities that sign the NATS servers' certificates", EnvVars: []string{"CREW_NATS_TLS_CA"}},
	&cli.IntFlag{Name: "nats-replicas", Usage: "copies, `N` from 1 to 5, of each run created and of the mail bucket, on a NATS cluster", Value: 1, EnvVars: []string{"CREW_NATS_REPLICAS"}},
}

// storeConn is the store that the commands of a process share: the
// connection to the --store server, or the state root under a .crew
// directory (env.root), dialled or found by the first command that needs
// it, closed by the command line that made it (execute; closing a root
// waits for the snapshots its runs still write). A command line is one
// command, except crew mcp's: its server is a command line whose tool
// calls are command lines run with its store, so that one connection
// serves them all, and its change notifications, until the server ends.
// Either store keeps one Log per run for the command line (KeepLogs), so
// that a tool call starts from the state the last one left.
// A reconnect after the server (or a cluster node) is lost is the NATS
// client's.
type storeConn struct {
	mu sync.Mutex
	s  io.Closer // nil until dialled
}

// storeConnKey is the context key of a command line's storeConn.
type storeConnKey struct{}

// withStoreConn returns ctx carrying the store connection of from (a
// command line's context), for a command line run within it (a tool call
// of crew mcp). Without one in from, ctx is returned as it is.
func withStoreConn(ctx, from context.Context) context.Context {
	if sc, ok := from.Value(storeConnKey{}).(*storeConn); ok {
		return context.WithValue(ctx, storeConnKey{}, sc)
	}
	return ctx
}

// shareStore returns ctx carrying a store connection for a command line:
// the one ctx carries already (withStoreConn), else a new one, which
// release closes once the command line ends.
func shareStore(ctx context.Context) (_ context.Context, release func()) {
	if _, ok := ctx.Value(storeConnKey{}).(*storeConn); ok {
		return ctx, func() {}
	}
	sc := &storeConn{}
	return context.WithValue(ctx, storeConnKey{}, sc), sc.close
}

// dialStore returns the store connection ctx carries (shareStore),
// calling dial if it has none yet. A dial that fails is tried again by
// the next command that asks.
func dialStore(ctx context.Context, dial func() (io.Closer, error)) (io.Closer, error) {
	sc, ok := ctx.Value(storeConnKey{}).(*storeConn)
	if !ok {
		return nil, errors.New("internal error: a command outside execute asks for the store")
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.s == nil {
		s, err := dial()
		if err != nil {
			return nil, err
		}
		sc.s = s
	}
	return sc.s, nil
}

func (sc *storeConn) close() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.s != nil {
		sc.s.Close()
		sc.s = nil
	}
}

// storeEnv is the environment that makes a crew started by this one (crew
// watch --exec CMD) find the same root: CREW_DIR, or CREW_STORE and the
// NATS settings given as flags.
func (e *env) storeEnv(root *run.Root) []string {
	if root.Dir() != "" {
		return []string{"CREW_DIR=" + root.Dir()}
	}
	out := []string{"CREW_STORE=" + e.c.String("store")}
	for _, f := range []struct{ flag, env string }{{"nats-creds", "CREW_NATS_CREDS"}, {"nats-tls-ca", "CREW_NATS_TLS_CA"}, {"nats-replicas", "CREW_NATS_REPLICAS"}} {
		if e.c.IsSet(f.flag) {
			out = append(out, f.env+"="+e.c.String(f.flag))
		}
	}
	return out
}
