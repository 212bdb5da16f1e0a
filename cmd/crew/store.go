// --store and the NATS flags (global): runs kept on NATS JetStream
// instead of under a .crew directory.

package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/run"
	natsstore "github.com/crew-dev/crew/store/nats"
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

// storeSchemes are the URL schemes --store takes: those of nats.go.
var storeSchemes = []string{"nats://", "tls://", "ws://", "wss://"}

// remoteRoot returns the root on the --store server, dialling it once per
// command. A --store that names no NATS server, or --dir given with it,
// is crew.ErrInvalid; a server that cannot be reached is an I/O error
// naming it and the reason (exit 1).
func (e *env) remoteRoot(addr string) (*run.Root, error) {
	if s, ok := e.c.App.Metadata[storeKey].(*natsstore.Store); ok {
		return run.NewRoot(s), nil
	}
	if e.c.String("dir") != "" {
		return nil, fmt.Errorf("--dir (CREW_DIR) and --store (CREW_STORE) are both set: runs live either under a .crew directory or on a server; unset one: %w", crew.ErrInvalid)
	}
	known := false
	for _, scheme := range storeSchemes {
		known = known || strings.HasPrefix(addr, scheme)
	}
	if !known {
		return nil, fmt.Errorf("--store %q: give NATS servers as nats://HOST:PORT[,HOST:PORT...] (or tls://): %w", natsstore.Redact(addr), crew.ErrInvalid)
	}
	s, err := natsstore.Dial(e.c.Context, addr, natsstore.Options{
		Creds: e.c.String("nats-creds"), TLSCA: e.c.String("nats-tls-ca"), Replicas: e.c.Int("nats-replicas"),
	})
	if err != nil {
		return nil, err
	}
	e.c.App.Metadata[storeKey] = s
	return run.NewRoot(s), nil
}

// closeStore closes the store the command dialled, if any.
func closeStore(app *cli.App) {
	if s, ok := app.Metadata[storeKey].(io.Closer); ok {
		s.Close()
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

// fileOnly refuses a command that acts on a .crew directory when --store
// is given (crew init): exit 2, saying what to do instead.
func (e *env) fileOnly(command, why string) error {
	if addr := e.c.String("store"); addr != "" {
		return fmt.Errorf("crew %s is for runs under a .crew directory; with --store %s (CREW_STORE) %s: %w", command, natsstore.Redact(addr), why, crew.ErrInvalid)
	}
	return nil
}
