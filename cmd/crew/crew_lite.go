//go:build crew_lite

// The lite build (make build's bin/crew: go build -tags crew_lite): every
// command on runs under a .crew directory, without the NATS client, the
// MCP SDK and the HTTP server, whose packages a process would otherwise
// load and initialise on every start (about a sixth of a short command's
// CPU time). A command that needs them, crew mcp, crew serve or any
// command given a --store (CREW_STORE), hands its process over to the
// full build, crew-full, before doing anything: the same arguments,
// environment and standard streams (execve(2)).

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew/run"
)

// fullName is the full build's file name, looked for next to this
// executable, then on PATH.
const fullName = "crew-full"

// handOverIfNeeded hands a command given a --store (or CREW_STORE) over
// to crew-full. args are the command line after "crew".
func handOverIfNeeded(args []string) error {
	if os.Getenv("CREW_STORE") == "" && !storeFlagIn(args) {
		return nil
	}
	return handOver()
}

// storeFlagIn reports whether args, before any "--", set --store.
func storeFlagIn(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == "store" {
			return true
		}
	}
	return false
}

// handOver replaces this process by crew-full with the same arguments
// and environment. It returns only on failure: no crew-full to be found
// (an I/O error, exit 1, saying where it was looked for) or execve's
// error.
func handOver() error {
	path, err := fullPath()
	if err != nil {
		return err
	}
	return syscall.Exec(path, append([]string{path}, os.Args[1:]...), os.Environ())
}

func fullPath() (string, error) {
	self, err := os.Executable()
	if err == nil {
		next := filepath.Join(filepath.Dir(self), fullName)
		if _, err := os.Stat(next); err == nil {
			return next, nil
		}
	}
	if p, err := exec.LookPath(fullName); err == nil {
		return p, nil
	}
	return "", errors.New("this crew is the lite build, without the NATS store and the MCP server; they are in " + fullName +
		", found neither next to it nor on PATH (make build puts both in bin/; go install ./cmd/crew builds a crew with everything)")
}

// serveMCP: crew mcp is served by crew-full.
func serveMCP(*cli.Context) error { return handOver() }

// serve: crew serve (the dashboard) is served by crew-full.
func serve(*cli.Context) error { return handOver() }

// natsAuth: crew nats auth is run by crew-full.
func natsAuth(*cli.Context) error { return handOver() }

// remoteRoot: a --store is served by crew-full (handOverIfNeeded has
// handed such a command over before it got here).
func (e *env) remoteRoot(string) (*run.Root, error) { return nil, handOver() }

// fileOnly: with --store, crew-full decides.
func (e *env) fileOnly(string, string) error {
	if e.c.String("store") != "" {
		return fmt.Errorf("--store: %w", handOver())
	}
	return nil
}
