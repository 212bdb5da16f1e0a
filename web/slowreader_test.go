package web_test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// A client with the token that posts a hook and never reads its answer
// (a slow reader: the answer is larger than the connection's buffers)
// must not hold up the other hooks of the same worker. crew serve sets
// no write deadline, and the hook writes its answer while it holds the
// worker's turn (app's holdShow), so every later hook of t1 waits for
// ever (Claude Code's hooks time out one after another; nothing reaches
// the agent by HTTP any more).
func TestHTTPHookSlowReaderHoldsNoTurn(t *testing.T) {
	t.Skip("breaker: a hook's answer written to a client that does not read holds the worker's turn (holdShow) for ever, no write deadline; fails: the next hook of t1 gets no answer")
	f := newFixture(t)
	big := strings.Repeat("x", 1<<20-64)
	for i := range 8 {
		f.steer(t, "t1", fmt.Sprintf("steer %d %s", i, big))
	}
	c, err := net.Dial("tcp", strings.TrimPrefix(f.base, "http://"))
	must(t, err)
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(4096)
	body := `{"hook_event_name":"PostToolUse","session_id":"s1"}`
	fmt.Fprintf(c, "POST /hooks/claude/PostToolUse HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nX-Crew-Run: r1\r\nX-Crew-Task: t1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		strings.TrimPrefix(f.base, "http://"), f.token, len(body), body)
	time.Sleep(500 * time.Millisecond) // its answer is being written, and blocks
	done := make(chan int, 1)
	go func() {
		code, _ := f.hook(t, "PostToolUse", "t1", nil)
		done <- code
	}()
	select {
	case code := <-done:
		t.Logf("the next hook: %d", code)
	case <-time.After(10 * time.Second):
		t.Fatal("the next hook of t1 got no answer in 10 s: a client that does not read its answer holds t1's turn")
	}
}
