package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
	"unicode/utf8"

	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/supervise"
)

// Following a worker log: a task's page starts with the last logTail
// bytes and is sent what is appended, looked for every logEvery.
const (
	logTail  = 64 << 10
	logEvery = 250 * time.Millisecond
	logChunk = 64 << 10 // the most one event carries
)

// logPart is the data of a "log" server-sent event: Text appended to
// the worker log, as text (human.Escape: control and bidirectional
// characters as Go escapes, newlines and tabs kept). Start says the
// page drops what it shows first (the stream's first part, or the file
// was truncated or replaced), Skipped how many bytes before Text are
// not sent (a long log's head).
type logPart struct {
	Text    string `json:"text"`
	Start   bool   `json:"start,omitempty"`
	Skipped int64  `json:"skipped,omitempty"`
}

// workerLog streams task's worker log on this machine
// (supervise.OpenWorkerLog) as server-sent "log" events (logPart, JSON),
// and follows it until the request ends: the worker's output, live, on
// the task's page. Until the file exists (a worker not yet started, or
// on another machine) it sends a "nolog" event saying so, and looks
// again.
func (s *Server) workerLog(w http.ResponseWriter, r *http.Request) {
	rn, id, ok := s.openTask(w, r)
	if !ok {
		return
	}
	st, err := rn.TaskState()
	var t *state.Task
	if err == nil {
		t, err = st.Task(id)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	open := func() (*os.File, error) {
		f, err := supervise.OpenWorkerLog(rn, id)
		if host, _ := os.Hostname(); err != nil && len(t.Workers) > 0 && t.Workers[len(t.Workers)-1].Host != host {
			w := t.Workers[len(t.Workers)-1]
			err = fmt.Errorf("task %s's worker ran on %s, which keeps its log in %s (crew task logs %s there)", id, w.Host, w.Log, id)
		}
		return f, err
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, "retry: 1000\n\n")
	ctx := r.Context()
	fl := &follower{}
	defer fl.close()
	quiet := time.Now()
	for {
		sent, err := fl.next(w, open)
		switch {
		case err != nil:
			fmt.Fprintf(w, "event: nolog\ndata: %s\n\n", oneLine(err.Error()))
			quiet = time.Now()
		case sent:
			quiet = time.Now()
		case time.Since(quiet) >= keepAlive:
			io.WriteString(w, ": keep-alive\n\n")
			quiet = time.Now()
		}
		if rc.Flush() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(logEvery):
		}
	}
}

// follower reads a file as it grows, in valid UTF-8.
type follower struct {
	f       *os.File
	off     int64  // bytes read
	pending []byte // the start of a character cut by the last read
	missing string // the error last said, so it is said once
}

func (fl *follower) close() {
	if fl.f != nil {
		fl.f.Close()
		fl.f = nil
	}
}

// next writes what was appended since the last call, as "log" events,
// opening the file with open first (again when it was truncated or
// replaced). It reports whether it wrote any. An error opening is
// returned once, until it changes.
func (fl *follower) next(w io.Writer, open func() (*os.File, error)) (bool, error) {
	start := false
	if fl.f != nil && fl.replaced() {
		fl.close()
	}
	if fl.f == nil {
		f, err := open()
		if err != nil {
			if err.Error() == fl.missing {
				return false, nil
			}
			fl.missing = err.Error()
			return false, err
		}
		fl.f, fl.off, fl.pending, fl.missing, start = f, 0, nil, "", true
	}
	fi, err := fl.f.Stat()
	if err != nil {
		return false, err
	}
	var skipped int64
	if start && fi.Size() > logTail {
		skipped = fi.Size() - logTail
		fl.off = skipped
	}
	sent := false
	for fl.off < fi.Size() || start {
		buf := make([]byte, min(fi.Size()-fl.off, logChunk))
		n, err := fl.f.ReadAt(buf, fl.off)
		if err != nil && !errors.Is(err, io.EOF) {
			return sent, err
		}
		fl.off += int64(n)
		text := fl.valid(buf[:n], skipped > 0 && !sent)
		if err := sendLog(w, logPart{Text: human.Escape(text), Start: start, Skipped: skipped}); err != nil {
			return sent, err
		}
		sent, start, skipped = true, false, 0
		if n == 0 {
			break
		}
	}
	return sent, nil
}

// replaced reports whether the open file was truncated, or its path
// now names another file.
func (fl *follower) replaced() bool {
	fi, err := fl.f.Stat()
	if err != nil || fi.Size() < fl.off {
		return true
	}
	now, err := os.Stat(fl.f.Name())
	return err != nil || !os.SameFile(fi, now)
}

// valid returns the text of b after what the last read left cut, and
// keeps the start of a character cut at its end for the next read. With
// head (the first read after a skipped head), the partial character b
// may start with is dropped.
func (fl *follower) valid(b []byte, head bool) string {
	b = append(fl.pending, b...)
	fl.pending = nil
	if head {
		for len(b) > 0 && !utf8.RuneStart(b[0]) {
			b = b[1:]
		}
	}
	cut := len(b)
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				cut = i
			}
			break
		}
	}
	fl.pending = append([]byte(nil), b[cut:]...)
	return string(b[:cut])
}

func sendLog(w io.Writer, p logPart) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "event: log\ndata: %s\n\n", b)
	return err
}
