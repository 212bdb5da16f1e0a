// --store and the NATS flags (global): runs kept on NATS JetStream
// instead of under a .crew directory.

package main

import (
	"errors"
	"io"
	"path/filepath"
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

// storeConn is the store of one command line: the connection to the
// --store server, or the state root under a .crew directory (env.root),
// dialled or found by the first operation that needs it, kept in the
// command line's cli.App (Metadata[storeKey]) and closed when the command
// line ends (execute; closing a root waits for the snapshots its runs
// still write). crew mcp's server is one command line: its App serves
// every tool call with this one store, and either store keeps one Log
// per run for it (KeepLogs), so that a tool call starts from the state
// the last one left. A reconnect after the server (or a cluster node) is
// lost is the NATS client's.
type storeConn struct {
	mu sync.Mutex
	s  io.Closer // nil until dialled
}

// storeKey is the cli.App Metadata key of a command line's storeConn.
const storeKey = "store"

// dialStore returns the command line's store, calling dial if it has
// none yet. A dial that fails is tried again by the next operation that
// asks.
func (e *env) dialStore(dial func() (io.Closer, error)) (io.Closer, error) {
	sc, ok := e.c.App.Metadata[storeKey].(*storeConn)
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
// watch --exec CMD, crew spawn's worker) find the same root: CREW_DIR, or
// CREW_STORE and the NATS settings given as flags, files as absolute
// paths. crew spawn's worker so gets the credentials crew spawn was given:
// with authorization, the worker's own (docs/nats.md, Authorization).
func (e *env) storeEnv(root *run.Root) []string {
	if root.Dir() != "" {
		return []string{"CREW_DIR=" + root.Dir()}
	}
	out := []string{"CREW_STORE=" + e.c.String("store")}
	for _, f := range []struct{ flag, env string }{{"nats-creds", "CREW_NATS_CREDS"}, {"nats-tls-ca", "CREW_NATS_TLS_CA"}, {"nats-replicas", "CREW_NATS_REPLICAS"}} {
		if e.c.IsSet(f.flag) {
			v := e.c.String(f.flag)
			if abs, err := filepath.Abs(v); err == nil && f.flag != "nats-replicas" {
				v = abs // a worker may start in another directory
			}
			out = append(out, f.env+"="+v)
		}
	}
	return out
}
