//go:build !crew_lite

// The full build (go build ./cmd/crew; bin/crew-full of make build):
// every command runs in this process, the NATS store and the MCP server
// included. crew_lite.go is the other build.

package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

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
			// A command that waits does nothing else meanwhile; crew mcp
			// and crew serve do.
			QuietWaits: !slices.Contains([]string{"mcp", "serve"}, e.c.Command.Name),
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

// natsAuth is crew nats auth: it keeps the signing keys in --out (made on
// the first run), writes auth.conf (no secret) and one credentials file
// per agent named, 0600, and prints the paths it wrote, never what they
// hold.
func natsAuth(c *cli.Context) error {
	e := newEnv(c)
	dir := c.String("out")
	agents := c.Args().Slice()
	leader := c.String("leader")
	if leader == "" && len(agents) == 0 {
		return fmt.Errorf("crew nats auth: name the leader (--leader NAME) or workers (AGENT...), or both: %w", crew.ErrInvalid)
	}
	// Every name is checked before anything is written.
	for _, a := range append(slices.Clone(agents), leader) {
		if a == "" {
			continue
		}
		if err := crew.ValidateID("agent", a); err != nil {
			return err
		}
		switch {
		case a == "crew":
			return fmt.Errorf("crew nats auth: crew is crew's own actor name, no agent's: %w", crew.ErrInvalid)
		case a == leader && slices.Contains(agents, a):
			return fmt.Errorf("crew nats auth: %s is named as the leader and as a worker; an agent has one role: %w", a, crew.ErrInvalid)
		case a != leader && a == "leader":
			return fmt.Errorf("crew nats auth: a worker cannot be named leader, the leader's actor name: %w", crew.ErrInvalid)
		}
	}
	auth, made, err := natsstore.LoadAuthority(dir)
	if err != nil {
		return err
	}
	conf, err := auth.ServerConfig()
	if err != nil {
		return err
	}
	confPath := filepath.Join(dir, natsstore.ServerConfigFile)
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return err
	}
	if made {
		fmt.Fprintf(e.stdout, "made the signing keys in %s (keep them there, 0600: whoever reads them can make any agent's credentials)\n", dir)
	}
	fmt.Fprintf(e.stdout, "wrote %s: include it in nats-server's configuration (include %s); agents added later need no restart\n", confPath, natsstore.ServerConfigFile)
	write := func(role natsstore.Role, agent string) error {
		path, err := auth.WriteCreds(dir, role, agent)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "wrote %s: %s %s's credentials (0600; give them to that agent only: --nats-creds or CREW_NATS_CREDS)\n", path, role, agent)
		return nil
	}
	if leader != "" {
		if err := write(natsstore.RoleLeader, leader); err != nil {
			return err
		}
	}
	for _, a := range agents {
		if err := write(natsstore.RoleWorker, a); err != nil {
			return err
		}
	}
	return nil
}
