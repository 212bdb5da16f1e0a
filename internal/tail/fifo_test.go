//go:build unix

package tail

import (
	"syscall"
	"testing"
	"time"
)

// TestFileFIFO: a FIFO in place of a worker's log is not opened (the
// open would block until a writer came, with the run's readers waiting):
// its tail is "", at once.
func TestFileFIFO(t *testing.T) {
	path := t.TempDir() + "/t1.log"
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() { done <- File(path, 0, 4096) }()
	select {
	case tail := <-done:
		if tail != "" {
			t.Fatalf("tail of a FIFO = %q, want none", tail)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("File is blocked opening a FIFO")
	}
}
