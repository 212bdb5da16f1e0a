//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// runSeqs returns the seq of r1's last event and the seq tasks.json holds.
func runSeqs(t *testing.T, dir string) (log, snap int64) {
	t.Helper()
	runDir := filepath.Join(dir, ".crew", "state", "runs", "r1")
	f, err := os.Open(filepath.Join(runDir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var e struct{ Seq int64 }
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("events.jsonl: %v", err)
		}
		if e.Seq != log+1 {
			t.Fatalf("events.jsonl: seq %d after %d", e.Seq, log)
		}
		log = e.Seq
	}
	data, err := os.ReadFile(filepath.Join(runDir, "tasks.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct{ Seq int64 }
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatalf("tasks.json: %v", err)
	}
	return log, st.Seq
}

// TestMCPEndsWithCallsInFlight: crew mcp's client closes its standard
// input while tool calls are under way and crew CLI processes write the
// same run. The server exits cleanly (exit 0, no panic), and tasks.json
// is at the log's last seq.
func TestMCPEndsWithCallsInFlight(t *testing.T) {
	bin := buildCrew(t)
	ctx, cancel := context.WithTimeout(context.Background(), e2eBound)
	defer cancel()
	for round := range 5 {
		f := newMCPFixture(t, ctx, bin)
		f.must("task", "add", "t1", "--title", "x")
		f.must("task", "start", "--task", "t1")
		cmd := exec.Command(f.bin, "mcp")
		cmd.Dir, cmd.Env = f.dir, slices.Clone(f.env)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		client := mcp.NewClient(&mcp.Implementation{Name: "crew-test", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var (
			wg     sync.WaitGroup
			calls  atomic.Int64
			enough = make(chan struct{})
		)
		for g := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 30 {
					if g%2 == 0 { // a CLI process beside the server
						if out, code := f.crew("steer", "t1", fmt.Sprint("cli ", g, i)); code != 0 {
							t.Errorf("crew steer: exit %d: %s", code, out)
						}
						continue
					}
					if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "crew_steer",
						Arguments: map[string]any{"task": "t1", "body": fmt.Sprint("mcp ", g, i)}}); err != nil {
						return // the session was closed
					}
					if calls.Add(1) == 20 {
						close(enough)
					}
				}
			}()
		}
		// Close while calls are in flight.
		<-enough
		err = cs.Close()
		wg.Wait()
		if err != nil || strings.Contains(stderr.String(), "panic") {
			t.Fatalf("round %d: crew mcp ended with %v\n%s", round, err, stderr.String())
		}
		if log, snap := runSeqs(t, f.dir); log != snap {
			t.Errorf("round %d: after crew mcp ended, tasks.json is at seq %d, the log at %d", round, snap, log)
		}
	}
}
