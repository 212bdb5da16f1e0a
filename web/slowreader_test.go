package web_test

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/crew-dev/crew/web"
)

// A client with the token that posts a hook and never reads its answer
// (a slow reader: the answer is larger than the connection's buffers)
// must not hold up the other hooks of the same worker: the hook writes
// its answer while it holds the worker's turn (app's holdShow), and
// without a write deadline every later hook of t1 would wait for ever
// (breaker2). The answer not taken is not recorded, so the next hook
// shows the steers.
func TestHTTPHookSlowReaderHoldsNoTurn(t *testing.T) {
	defer web.SetAnswerTimeout(time.Second)()
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
	type answer struct {
		code int
		body string
	}
	done := make(chan answer, 1)
	go func() {
		code, body := f.hook(t, "PostToolUse", "t1", nil)
		done <- answer{code, body}
	}()
	select {
	case got := <-done:
		if got.code != http.StatusOK || !strings.Contains(got.body, "steer 0 ") || !strings.Contains(got.body, "steer 7 ") {
			t.Fatalf("the next hook of t1: %d, %.200q...: want the steers the answer not taken did not deliver", got.code, got.body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the next hook of t1 got no answer in 10 s: a client that does not read its answer holds t1's turn")
	}
}
