//go:build unix

package main

// The lite build (make build's bin/crew, -tags crew_lite) links neither
// the NATS client nor the MCP SDK, and hands crew mcp and --store
// commands over to crew-full beside it: built here as make build builds
// them, and driven as a user would.

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crew-dev/crew/internal/natstest"
)

// buildLite builds the lite crew and, unless alone, crew-full next to it,
// into a new directory; it returns the lite binary.
func buildLite(t *testing.T, alone bool) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("needs go: %v", err)
	}
	dir := t.TempDir()
	builds := map[string]string{"crew": "crew_lite"}
	if !alone {
		builds["crew-full"] = ""
	}
	for name, tags := range builds {
		cmd := exec.Command("go", "build", "-tags", tags, "-o", filepath.Join(dir, name), ".")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build -tags %q: %v\n%s", tags, err, out)
		}
	}
	return filepath.Join(dir, "crew")
}

func TestLiteBuildLinksNoNATSNorMCP(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-tags", "crew_lite", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.Contains(pkg, "nats") || strings.Contains(pkg, "modelcontextprotocol") || pkg == "github.com/crew-dev/crew/mcpserver" ||
			pkg == "net/http" || pkg == "github.com/crew-dev/crew/web" {
			t.Errorf("the lite build links %s", pkg)
		}
	}
}

func TestLiteBuildHandsOver(t *testing.T) {
	t.Parallel()
	bin := buildLite(t, false)
	dir := t.TempDir()
	env := e2eEnv(filepath.Dir(bin), "CREW_DIR="+filepath.Join(dir, ".crew"))
	crew := func(extra []string, args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = dir, append(append([]string{}, env...), extra...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return stdout.String(), stderr.String(), code
	}
	// A file-store command runs in the lite process itself.
	if _, stderr, code := crew(nil, "init"); code != 0 {
		t.Fatalf("init: exit %d: %s", code, stderr)
	}
	// --store and CREW_STORE: crew-full serves them, on a real server.
	srv := natstest.Server(t)
	url := srv.ClientURL()
	if out, stderr, code := crew([]string{"CREW_DIR="}, "--store", url, "run", "create", "--id", "r1"); code != 0 || out != "r1\n" {
		t.Fatalf("run create --store: exit %d, %q, %s", code, out, stderr)
	}
	if out, stderr, code := crew([]string{"CREW_DIR=", "CREW_STORE=" + url}, "run", "list"); code != 0 || !strings.Contains(out, "\nr1 ") {
		t.Fatalf("run list with CREW_STORE: exit %d, %q, %s", code, out, stderr)
	}
	// crew serve: crew-full serves the dashboard; its first line is the URL.
	serve := exec.Command(bin, "serve", "--addr", "127.0.0.1:0")
	serve.Dir, serve.Env = dir, env
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	serve.Process.Kill()
	serve.Wait()
	if err != nil || !strings.HasPrefix(line, "http://127.0.0.1:") || !strings.Contains(line, "token=") {
		t.Fatalf("crew serve through the lite build printed %q (%v)", line, err)
	}
	// crew mcp: a real client talks to crew-full through the lite binary.
	ctx, cancel := context.WithTimeout(context.Background(), e2eBound)
	defer cancel()
	cmd := exec.Command(bin, "mcp")
	cmd.Dir, cmd.Env = dir, env
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "crew-test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("crew mcp through the lite build: %v", err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != len(mcpTools) {
		t.Fatalf("tools through the lite build: %v, %d tools, want %d", err, len(tools.Tools), len(mcpTools))
	}
}

func TestLiteBuildWithoutCrewFull(t *testing.T) {
	t.Parallel()
	bin := buildLite(t, true)
	for _, args := range [][]string{{"mcp"}, {"--store", "nats://127.0.0.1:4222", "run", "list"}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = e2eEnv(filepath.Dir(bin)) // PATH has the lite crew's directory, without crew-full
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitIO || !strings.Contains(string(out), "crew-full, found neither next to it nor on PATH") {
			t.Errorf("crew %v without crew-full: %v: %s", args, err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(bin), "crew-full")); err == nil {
		t.Fatal("crew-full was built")
	}
}
