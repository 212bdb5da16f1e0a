//go:build !crew_lite

// crew mcp's server: the full build only (the MCP SDK is not linked into
// the lite one).

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/mcpserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"
)

func serveMCP(c *cli.Context) error {
	if c.Args().Len() > 0 {
		return fmt.Errorf("mcp takes no arguments (identity comes from --run, --task, --as or CREW_*): %q: %w", c.Args().Slice(), crew.ErrInvalid)
	}
	// The identity is checked once, at start: every tool call acts with it.
	for _, id := range []struct{ flag, kind string }{{"run", "run"}, {"task", "task"}, {"as", "agent"}} {
		if v := c.String(id.flag); v != "" {
			if err := crew.ValidateID(id.kind, v); err != nil {
				return err
			}
		}
	}
	var every time.Duration // mcpserver's default
	if c.IsSet("progress-every") {
		var err error
		if every, err = duration(c.String("progress-every")); err != nil {
			return err
		}
	}
	// One App for the server's life: its tool calls share the root found
	// (or the store dialled) once for this command line, and the Log each
	// run keeps.
	e := newEnv(c)
	s := mcpserver.New(mcpserver.Options{App: e.app(), Version: version, Task: c.String("task"), ProgressEvery: every})
	ctx, stop := context.WithCancel(c.Context)
	defer stop()
	// Subscribed clients hear of changed resources as the run's log grows
	// (the watch the CLI's waits use: fsnotify on the file store, a
	// subscription on NATS); what fails is said on standard error
	// (standard output is the protocol).
	go s.Follow(ctx, 0, func(err error) { e.warn(fmt.Errorf("mcp resources: %w", err)) })
	err := s.Run(ctx, &mcp.StdioTransport{})
	if err == nil || errors.Is(err, io.EOF) || c.Context.Err() != nil {
		return nil // the client closed standard input, or crew was told to stop
	}
	return err
}
