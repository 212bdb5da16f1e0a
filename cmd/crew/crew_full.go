//go:build !crew_lite

// The full build (go build ./cmd/crew; bin/crew-full of make build):
// every command runs in this process, the NATS store and the MCP server
// included. crew_lite.go is the other build.

package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/run"
	natsstore "github.com/crew-dev/crew/store/nats"
)

// storeSchemes are the URL schemes --store takes: those of nats.go.
var storeSchemes = []string{"nats://", "tls://", "ws://", "wss://"}

// handOverIfNeeded does nothing in the full build: it runs everything.
func handOverIfNeeded([]string) error { return nil }

// remoteRoot returns the root on the --store server, dialling it once
// per command line (dialStore: once for crew mcp's server and all of its
// tool calls). A --store that names no NATS server, or --dir given with it,
// is crew.ErrInvalid; a server that cannot be reached is an I/O error
// naming it and the reason (exit 1).
func (e *env) remoteRoot(addr string) (*run.Root, error) {
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
	s, err := e.dialStore(func() (io.Closer, error) {
		return natsstore.Dial(e.c.Context, addr, natsstore.Options{
			Creds: e.c.String("nats-creds"), TLSCA: e.c.String("nats-tls-ca"), Replicas: e.c.Int("nats-replicas"),
			KeepLogs: true, // a command line may be crew mcp's server, whose tool calls share the store
		})
	})
	if err != nil {
		return nil, err
	}
	return run.NewRoot(s.(*natsstore.Store)), nil
}

// fileOnly refuses a command that acts on a .crew directory when --store
// is given (crew init): exit 2, saying what to do instead.
func (e *env) fileOnly(command, why string) error {
	if addr := e.c.String("store"); addr != "" {
		return fmt.Errorf("crew %s is for runs under a .crew directory; with --store %s (CREW_STORE) %s: %w", command, natsstore.Redact(addr), why, crew.ErrInvalid)
	}
	return nil
}
