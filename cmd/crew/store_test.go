package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/internal/natstest"
	"github.com/crew-dev/crew/run"
)

// --nats-tls-ca: a server that requires TLS, with a certificate signed by
// an authority the system does not trust, is reached with that
// authority's PEM file, and refused without it (exit 1, naming the
// server and the reason).
func TestStoreTLS(t *testing.T) {
	srv, ca := natstest.TLSServer(t)
	url := srv.ClientURL() // tls://127.0.0.1:PORT
	crew := func(args ...string) (string, string, int) {
		var stdout, stderr strings.Builder
		code := Main(append([]string{"crew", "--store", url}, args...), strings.NewReader(""), &stdout, &stderr)
		return stdout.String(), stderr.String(), code
	}
	if out, errOut, code := crew("run", "create", "--id", "r1", "--nats-tls-ca", ca); code != 0 || strings.TrimSpace(out) != "r1" {
		t.Fatalf("run create with --nats-tls-ca: exit %d, %q, %s", code, out, errOut)
	}
	t.Setenv("CREW_NATS_TLS_CA", ca)
	if out, errOut, code := crew("run", "list"); code != 0 || !strings.Contains(out, "\nr1 ") {
		t.Fatalf("run list with CREW_NATS_TLS_CA: exit %d, %q, %s", code, out, errOut)
	}
	t.Setenv("CREW_NATS_TLS_CA", "")
	_, errOut, code := crew("run", "list")
	if code != 1 || !strings.Contains(errOut, "connect to NATS at "+url+": ") || !strings.Contains(errOut, "certificate") {
		t.Fatalf("run list without the CA: exit %d, %q; want 1 and a certificate error naming the server", code, errOut)
	}
}

// --nats-creds: a server that admits only users it trusts is reached with
// a user's credentials file, and refused without it (exit 1, naming the
// server and the reason); the file's content is never printed.
func TestStoreCreds(t *testing.T) {
	srv, creds := natstest.CredsServer(t)
	seed := ""
	data, err := os.ReadFile(creds)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "SU") {
			seed = line // the user's nkey seed: the secret
		}
	}
	if seed == "" {
		t.Fatalf("no seed in %s", creds)
	}
	crew := func(args ...string) (string, string, int) {
		var stdout, stderr strings.Builder
		code := Main(append([]string{"crew", "--store", srv.ClientURL()}, args...), strings.NewReader(""), &stdout, &stderr)
		return stdout.String(), stderr.String(), code
	}
	if out, errOut, code := crew("run", "create", "--id", "r1", "--nats-creds", creds); code != 0 || strings.TrimSpace(out) != "r1" {
		t.Fatalf("run create with --nats-creds: exit %d, %q, %s", code, out, errOut)
	}
	t.Setenv("CREW_NATS_CREDS", creds)
	if out, errOut, code := crew("task", "add", "t1", "--run", "r1"); code != 0 || strings.TrimSpace(out) != "t1 added to run r1" {
		t.Fatalf("task add with CREW_NATS_CREDS: exit %d, %q, %s", code, out, errOut)
	}
	t.Setenv("CREW_NATS_CREDS", "")
	_, errOut, code := crew("run", "list")
	t.Logf("without credentials: %s", errOut)
	if code != 1 || !strings.Contains(errOut, "connect to NATS at "+srv.ClientURL()+": ") || !strings.Contains(strings.ToLower(errOut), "authorization") {
		t.Fatalf("run list without credentials: exit %d, %q; want 1 and an authorization error naming the server", code, errOut)
	}
	// Credentials of another kind of key: refused, the secret not shown.
	bad := filepath.Join(t.TempDir(), "bad.creds")
	os.WriteFile(bad, []byte(strings.Replace(string(data), seed, "SA"+seed[2:], 1)), 0o600)
	for _, args := range [][]string{{"run", "list", "--nats-creds", bad}, {"--json", "run", "list", "--nats-creds", bad}} {
		_, errOut, code = crew(args...)
		t.Logf("crew %v: %s", args, errOut)
		if code != 1 || strings.Contains(errOut, seed[2:12]) {
			t.Errorf("crew %v: exit %d, %q; want 1 without the seed", args, code, errOut)
		}
	}
}

// An event over the server's max_payload is refused with exit 2, naming
// both sizes; nothing is written.
func TestStoreEventOverMaxPayload(t *testing.T) {
	srv := natstest.Server(t) // max_payload 8 MiB
	t.Setenv("CREW_RUN", "r1")
	crew := func(stdin string, args ...string) (string, string, int) {
		var stdout, stderr strings.Builder
		code := Main(append([]string{"crew", "--store", srv.ClientURL()}, args...), strings.NewReader(stdin), &stdout, &stderr)
		return stdout.String(), stderr.String(), code
	}
	for _, args := range [][]string{{"run", "create", "--id", "r1"}, {"task", "add", "t1"}} {
		if _, errOut, code := crew("", args...); code != 0 {
			t.Fatalf("crew %v: exit %d: %s", args, code, errOut)
		}
	}
	_, errOut, code := crew(strings.Repeat("x", 9<<20), "steer", "t1", "-", "--max-body", "20000000")
	if code != 2 || !strings.Contains(errOut, "over the server's max_payload (8388608 bytes") {
		t.Fatalf("a 9 MiB steer: exit %d, %q; want 2 and the server's max_payload named", code, errOut)
	}
	if out, errOut, code := crew("", "events", "--since", "2"); code != 0 || out != "" {
		t.Fatalf("after the refused steer, crew events --since 2: exit %d, %q, %s; want nothing", code, out, errOut)
	}
}

// crew mcp's tool calls are carried out by one App for the server's
// command line (serveMCP: newEnv(c).app()): they share its root and, on
// the file store as on NATS, each run's Log (file.Store.KeepLogs), so a
// second Open of the run returns the Log the calls used, with the state
// it keeps.
func TestToolCallsShareRunLogs(t *testing.T) {
	dir := t.TempDir()
	for _, line := range [][]string{{"init"}, {"run", "create", "--id", "r1"}, {"task", "add", "t1", "--run", "r1"}} {
		var stdout, stderr strings.Builder
		if err := execute(context.Background(), append([]string{"crew", "--dir", dir}, line...), strings.NewReader(""), &stdout, &stderr); err != nil {
			t.Fatalf("crew %v: %v\n%s", line, err, stderr.String())
		}
	}
	// A command line that keeps its env's App, as crew mcp's server does.
	cl := newApp(strings.NewReader(""), io.Discard, io.Discard)
	sc := &storeConn{}
	cl.Metadata[storeKey] = sc
	defer sc.close()
	var a *app.App
	cl.Commands = append(cl.Commands, &cli.Command{Name: "server", Flags: []cli.Flag{runFlag, taskFlag, asFlag},
		Action: func(c *cli.Context) error { a = newEnv(c).app(); return nil }})
	if err := cl.RunContext(context.Background(), []string{"crew", "--dir", dir, "server", "--run", "r1"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 2 {
		if _, err := a.Steer(ctx, app.ToWorker{Task: "t1", Body: fmt.Sprintf("steer %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := a.Run("")
	if err != nil {
		t.Fatal(err)
	}
	second, err := a.Run("r1")
	if err != nil {
		t.Fatal(err)
	}
	if first.Log() != second.Log() {
		t.Fatal("two Opens of run r1 by the server's App returned two Logs; want the one its calls share")
	}
	if root, ok := sc.s.(*run.Root); !ok || root.Dir() != first.Root().Dir() {
		t.Fatalf("the command line's store is %T; want the root the App's runs live in", sc.s)
	}
}
