package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/crew-dev/crew/app"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/supervise"
)

// keepAlive is how often a quiet stream sends a comment, so that proxies
// and the browser keep it open.
const keepAlive = 20 * time.Second

// lifeEvery is how often a stream asked for life looks at what the
// run's tasks are doing.
const lifeEvery = time.Second

// live streams a run's events as server-sent events (the HTML Living
// Standard, "Server-sent events"): one "crew" event per log event, its
// id the seq and its data the event's row (eventRow, JSON); a "damage"
// event, its data the place, for a damaged line. It starts after the
// seq of the Last-Event-ID header (a reconnecting browser), else of the
// since parameter (the seq the page was built at), and follows the log
// with run.Run.Watch, as crew events --follow does, until the request
// ends. With life=1 (the board, a task's page) it also sends a "life"
// event when what a task (the task parameter's, if given) is doing
// changes with no event in the log (a worker turns quiet, a heartbeat,
// a process gone: supervise.Liveness), looking every lifeEvery.
func (s *Server) live(w http.ResponseWriter, r *http.Request) {
	rn, err := s.open(r.PathValue("run"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	since, err := startSeq(r)
	if err != nil {
		http.Error(w, "crew serve: "+err.Error(), http.StatusBadRequest)
		return
	}
	rc := http.NewResponseController(w)
	// The watch exists before the first read, so that nothing appended
	// in between is missed (run.Run.Watch).
	wt := rn.Watch()
	defer wt.Close()
	c, err := rn.Events(since)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer c.Close()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, "retry: 1000\n\n")
	ctx := r.Context()
	wait, seen := keepAlive, ""
	life, only := r.URL.Query().Get("life") == "1", r.URL.Query().Get("task")
	if life {
		wait, seen = lifeEvery, s.lifePrint(rn, only)
	}
	wrote, looked := time.Now(), time.Now() // the last write, the last look at the tasks' life
	for {
		n, err := sendNew(w, c)
		if err != nil {
			return
		}
		if life && time.Since(looked) >= lifeEvery {
			// Events draw the page again, with what the tasks do then:
			// a change is told apart only when none came.
			looked = time.Now()
			if p := s.lifePrint(rn, only); p != seen {
				seen = p
				if n == 0 {
					io.WriteString(w, "event: life\ndata: changed\n\n")
					wrote = time.Now()
				}
			}
		}
		if n > 0 {
			wrote = time.Now()
		} else if time.Since(wrote) >= keepAlive {
			wrote = time.Now()
			io.WriteString(w, ": keep-alive\n\n")
		}
		if err := rc.Flush(); err != nil {
			return
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		err = wt.Wait(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return // the page went away
		case err != nil && !errors.Is(err, context.DeadlineExceeded):
			// The watch failed: say so and end; the browser reconnects
			// after its retry delay, from the last seq it saw.
			fmt.Fprintf(w, "event: damage\ndata: watching the log failed: %s\n\n", oneLine(err.Error()))
			return
		}
	}
}

// runsEvery is how often the stream of the runs list looks at the runs.
const runsEvery = time.Second

// liveRuns streams a "runs" server-sent event whenever the runs list
// would change: a run created, an event appended to one, a run found
// damaged. No store tells of a new run, so it looks every runsEvery
// (the runs' manifests and the last seq of each), until the request
// ends.
func (s *Server) liveRuns(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, "retry: 1000\n\n")
	ctx := r.Context()
	seen, quiet := s.runsPrint(), time.Now()
	t := time.NewTicker(runsEvery)
	defer t.Stop()
	for {
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if p := s.runsPrint(); p != seen {
			seen, quiet = p, time.Now()
			io.WriteString(w, "event: runs\ndata: changed\n\n")
		} else if time.Since(quiet) >= keepAlive {
			quiet = time.Now()
			io.WriteString(w, ": keep-alive\n\n")
		}
	}
}

// runsPrint is text that changes when the runs list would: each run's
// id and last seq, and the runs that cannot be read.
func (s *Server) runsPrint() string {
	ms, bad, err := s.root.List()
	if err != nil {
		return "error: " + err.Error()
	}
	var b strings.Builder
	for _, m := range ms {
		rn, err := s.root.Open(m.ID)
		var st *state.State
		if err == nil {
			st, err = rn.TaskState()
		}
		if err != nil {
			fmt.Fprintf(&b, "%s error %s\n", m.ID, err)
			continue
		}
		fmt.Fprintf(&b, "%s %d %s\n", m.ID, st.Seq, errText(st.Err()))
	}
	for _, e := range bad {
		fmt.Fprintf(&b, "bad %s\n", e)
	}
	return b.String()
}

// lifePrint is what the tasks of rn underway are doing (only task id,
// unless id is ""), as text that changes when a card's liveness would
// (its word, its since, its worker's pid), and for the board which
// messages it lists as not delivered (app.UndeliveredIn).
func (s *Server) lifePrint(rn *run.Run, id string) string {
	read := rn.TaskState
	if id == "" {
		read = rn.State // the board's: with the open messages, for the undelivered ones
	}
	st, err := read()
	if err != nil {
		return "error: " + err.Error()
	}
	live := supervise.Liveness(rn, st, s.quiet, time.Now())
	ids := make([]string, 0, len(live))
	for t := range live {
		if id == "" || t == id {
			ids = append(ids, t)
		}
	}
	sort.Strings(ids)
	var b strings.Builder
	for _, t := range ids {
		l := live[t]
		fmt.Fprintf(&b, "%s %s %s %d\n", t, l.State, l.Since, l.PID)
	}
	if id == "" {
		// The board lists messages not delivered after a while: one
		// turns undelivered with no event in the log.
		list, err := app.UndeliveredIn(rn, st, live, s.undelivered)
		if err != nil {
			return "error: " + err.Error()
		}
		for _, u := range list {
			fmt.Fprintf(&b, "undelivered %s\n", u.Message.ID) // not its reason, which says for how long
		}
	}
	return b.String()
}

// sendNew writes the events the cursor has after its position, up to the
// log's end, and returns how many it wrote (damage included).
func sendNew(w io.Writer, c interface{ Next() (events.Event, error) }) (int, error) {
	for n := 0; ; n++ {
		e, err := c.Next()
		var de *events.DamageError
		switch {
		case errors.Is(err, io.EOF):
			return n, nil
		case errors.As(err, &de):
			if _, err := fmt.Fprintf(w, "event: damage\ndata: %s\n\n", oneLine(de.Error())); err != nil {
				return n, err
			}
			continue
		case err != nil:
			fmt.Fprintf(w, "event: damage\ndata: %s\n\n", oneLine(err.Error()))
			return n, err
		}
		b, err := json.Marshal(rowOf(&e))
		if err != nil {
			return n, err
		}
		if _, err := fmt.Fprintf(w, "id: %d\nevent: crew\ndata: %s\n\n", e.Seq, b); err != nil {
			return n, err
		}
	}
}

// oneLine keeps s on one data line of the stream.
func oneLine(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }

// startSeq is the seq a stream starts after: Last-Event-ID, else since,
// else 0 (the whole log).
func startSeq(r *http.Request) (int64, error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("since")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("seq %q: want a decimal number, 0 or more", v)
	}
	return n, nil
}
