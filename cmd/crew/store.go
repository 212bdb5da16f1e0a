// --store and the NATS flags (global): runs kept on NATS JetStream
// instead of under a .crew directory.

package main

import (
	"io"

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

// storeKey is the App.Metadata key of the store a command dialled, which
// Main closes when the command ends.
const storeKey = "store"

// fileRootKey is the App.Metadata key of the state root under a .crew
// directory a command found (env.root), which Main closes too: its runs
// may still be writing their snapshots (run.Root.Close).
const fileRootKey = "fileRoot"

// closeStore closes the store the command dialled or found, if any.
func closeStore(app *cli.App) {
	if s, ok := app.Metadata[storeKey].(io.Closer); ok {
		s.Close()
	}
	if r, ok := app.Metadata[fileRootKey].(*run.Root); ok {
		r.Close()
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
