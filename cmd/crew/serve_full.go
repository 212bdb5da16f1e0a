//go:build !crew_lite

// crew serve's server: the full build only.

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/web"
	"github.com/urfave/cli/v2"
)

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
	token := web.NewToken()
	s, err := web.New(root, web.Options{Hosts: hosts, Token: token, Actor: actor, QuietAfter: quiet, UndeliveredAfter: undelivered})
	if err != nil {
		return err
	}
	url := "http://" + ln.Addr().String() + "/?token=" + token
	if remote {
		fmt.Fprintf(e.stderr, "crew: warning: serving on %s, not a loopback address: anyone who reaches it with the token acts as the leader, over plain HTTP\n", ln.Addr())
	}
	if err := e.emit(map[string]string{"url": url}, url); err != nil {
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
