//go:build !crew_lite

// crew mcp's server: the full build only (the MCP SDK is not linked into
// the lite one).

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/mcpserver"
	"github.com/crew-dev/crew/run"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"
)

// mcpIdentity is the environment each identity flag of crew mcp stands
// for: given to the server, it is set for every tool call's command, as
// if the agent's shell had it.
var mcpIdentity = []struct{ flag, env string }{{"run", "CREW_RUN"}, {"task", "CREW_TASK"}, {"as", "CREW_AGENT"}}

func serveMCP(c *cli.Context) error {
	if c.Args().Len() > 0 {
		return fmt.Errorf("mcp takes no arguments (identity comes from --run, --task, --as or CREW_*): %q: %w", c.Args().Slice(), crew.ErrInvalid)
	}
	for _, id := range mcpIdentity {
		v := c.String(id.flag)
		if v == "" {
			continue
		}
		if err := crew.ValidateID(map[string]string{"run": "run", "task": "task", "as": "agent"}[id.flag], v); err != nil {
			return err
		}
		if err := os.Setenv(id.env, v); err != nil {
			return err
		}
	}
	var every time.Duration // mcpserver's default
	if c.IsSet("progress-every") {
		var err error
		if every, err = duration(c.String("progress-every")); err != nil {
			return err
		}
	}
	globals := globalArgs(c)
	exec := func(ctx context.Context, args []string, stdin string) ([]byte, error) {
		var stdout, stderr bytes.Buffer
		line := append(append([]string{"crew", "--json"}, globals...), args...)
		// The server's store connection (shareStore), not one per call.
		err := execute(withStoreConn(ctx, c.Context), line, strings.NewReader(stdin), &stdout, &stderr)
		if err == nil {
			return stdout.Bytes(), nil
		}
		code, class := exitCode(err)
		msg := message(err)
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			class, msg = "interrupted", "the call was cancelled; "+msg
		}
		if warn := strings.TrimSpace(stderr.String()); warn != "" {
			msg += "\n" + warn
		}
		return stdout.Bytes(), &mcpserver.Error{Class: class, Exit: code, Message: msg}
	}
	s := mcpserver.New(mcpserver.Options{App: newEnv(c).app(), Exec: exec, Version: version, Task: c.String("task"), ProgressEvery: every})
	ctx, stop := context.WithCancel(c.Context)
	defer stop()
	go notifyChanges(ctx, newEnv(c), s)
	err := s.Run(ctx, &mcp.StdioTransport{})
	if err == nil || errors.Is(err, io.EOF) || c.Context.Err() != nil {
		return nil // the client closed standard input, or crew was told to stop
	}
	return err
}

// globalArgs returns the global flags crew mcp was given (the state root,
// the store, file modes, the body limit), as flags for each tool call's
// command line; those with a CREW_* variable reach it through the
// environment too.
func globalArgs(c *cli.Context) []string {
	var out []string
	for _, f := range globalFlags {
		name := f.Names()[0]
		if name == "json" || !c.IsSet(name) {
			continue
		}
		switch f.(type) {
		case *cli.BoolFlag:
			if c.Bool(name) {
				out = append(out, "--"+name)
			}
		default:
			out = append(out, fmt.Sprintf("--%s=%v", name, c.Value(name)))
		}
	}
	return out
}

// notifyChanges tells s each time the run's log grows (the watch the
// CLI's waits use: fsnotify on the file store, a subscription on NATS),
// so that subscribed clients hear of changed resources. The run is the
// server's (--run, CREW_RUN), else the latest; until it exists, it is
// looked for again every second. What fails is said on standard error
// (standard output is the protocol).
func notifyChanges(ctx context.Context, e *env, s *mcpserver.Server) {
	var r *run.Run
	for r == nil {
		var err error
		if r, err = e.run(); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	w := r.Watch()
	defer w.Close()
	for {
		if err := s.Changed(ctx); err != nil && ctx.Err() == nil {
			e.warn(fmt.Errorf("mcp resources: %w", err))
		}
		if err := w.Wait(ctx); err != nil {
			return
		}
	}
}
