//go:build !crew_lite

// crew serve's server: the full build only.

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/web"
	"github.com/urfave/cli/v2"
)

// serveGCPercent is crew serve's GOGC, unless the environment sets one.
const serveGCPercent = 400

// serve listens, prints the URL with its token, and serves until
// interrupted (exit 130, as --follow ends).
func serve(c *cli.Context) error {
	e := newEnv(c)
	if c.Args().Len() > 0 {
		return fmt.Errorf("crew serve takes no arguments: %q: %w", c.Args().Slice(), crew.ErrInvalid)
	}
	addr := c.String("addr")
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("--addr %q: want HOST:PORT, such as 127.0.0.1:7777: %w", addr, crew.ErrInvalid)
	}
	remote := !web.Loopback(addr)
	if remote && !c.Bool("allow-remote") {
		return fmt.Errorf("--addr %s is not a loopback address: other machines could reach the dashboard and act as the leader; add --allow-remote to mean it: %w", addr, crew.ErrInvalid)
	}
	actor, err := e.actor("")
	if err != nil {
		return err
	}
	quiet, err := duration(c.String("quiet-after"))
	if err != nil {
		return err
	}
	undelivered, err := duration(c.String("undelivered-after"))
	if err != nil {
		return err
	}
	if os.Getenv("GOGC") == "" {
		// A resident server's live heap is small (a few MB: the runs it
		// holds open), so at GOGC=100 it collected every few hundred
		// requests and spent a fifth of its CPU doing so under a burst
		// of MCP calls; the soft memory limit (memoryLimit) still bounds
		// the heap.
		debug.SetGCPercent(serveGCPercent)
	}
	root, err := e.root()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		host, _, _ := net.SplitHostPort(addr)
		return fmt.Errorf("listen on %s: the port is in use (another crew serve?); give another with --addr, such as --addr %s (any free port): %w", addr, net.JoinHostPort(host, "0"), crew.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	defer ln.Close()
	hosts, err := web.Hosts(ln.Addr().String())
	if err != nil {
		return err
	}
	token, err := serveToken()
	if err != nil {
		return err
	}
	s, err := web.New(root, web.Options{Hosts: hosts, Token: token, Actor: actor, QuietAfter: quiet, UndeliveredAfter: undelivered, Version: version})
	if err != nil {
		return err
	}
	base := "http://" + ln.Addr().String()
	url := base + "/?token=" + token
	mcpURL := base + web.MCPPath + "?token=" + token
	if remote {
		fmt.Fprintf(e.stderr, "crew: warning: serving on %s, not a loopback address: anyone who reaches it with the token acts as the leader, over plain HTTP\n", ln.Addr())
	}
	if err := e.emit(map[string]string{"url": url, "mcp": mcpURL, "hooks": base + web.HooksPath}, url+"\nmcp: "+mcpURL); err != nil {
		return err
	}
	if c.Bool("open") {
		if err := openBrowser(url); err != nil {
			fmt.Fprintf(e.stderr, "crew: could not open a browser (%v); open the URL above\n", err)
		}
	}
	// The board shows lost workers' tasks failed with no command run:
	// the server reaps them itself.
	go s.Supervise(c.Context, 0, e.warn)
	return serveUntil(c.Context, ln, s)
}

// serveToken is the token crew serve asks for: CREW_TOKEN when set (so
// that agents whose HTTP hooks send it, crew setup claude --http, go on
// working across restarts), else a new random one.
func serveToken() (string, error) {
	t := os.Getenv(tokenEnv)
	if t == "" {
		return web.NewToken(), nil
	}
	if len(t) < 32 {
		return "", fmt.Errorf("%s holds %d characters; a token needs at least 32 (such as: openssl rand -hex 32): %w", tokenEnv, len(t), crew.ErrInvalid)
	}
	return t, nil
}

// serveUntil serves on ln until ctx ends, then shuts the server down,
// giving open requests a second.
func serveUntil(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return ctx.Err()
	}
}

// openBrowser opens url in the desktop's browser.
func openBrowser(url string) error {
	name, args := "xdg-open", []string{url}
	switch runtime.GOOS {
	case "darwin":
		name = "open"
	case "windows":
		name, args = "rundll32", []string{"url.dll,FileProtocolHandler", url}
	}
	return exec.Command(name, args...).Start()
}
