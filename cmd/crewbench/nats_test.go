package main

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// measureNATS runs end to end on an embedded server, with crew processes
// (a smoke test of the bench's NATS part; the figures themselves are
// make bench's, never a test's).
func TestMeasureNATSRuns(t *testing.T) {
	bin := buildCrew(t)
	res, err := measureNATS(t.TempDir(), config{crew: bin, rounds: 1, round: 50 * time.Millisecond, wake: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.RawPublishPerS <= 0 || res.SendPerS <= 0 || res.SendRatio <= 0 || len(res.raw) != 1 {
		t.Fatalf("nothing measured: %+v", res)
	}
	t.Logf("%+v", res)
}

// buildCrew builds the crew binary into a temporary directory.
func buildCrew(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "crew")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/crew-dev/crew/cmd/crew").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
