package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/crew-dev/crew/events"
)

// keepAlive is how often a quiet stream sends a comment, so that proxies
// and the browser keep it open.
const keepAlive = 20 * time.Second

// live streams a run's events as server-sent events (the HTML Living
// Standard, "Server-sent events"): one "crew" event per log event, its
// id the seq and its data the event's row (eventRow, JSON); a "damage"
// event, its data the place, for a damaged line. It starts after the
// seq of the Last-Event-ID header (a reconnecting browser), else of the
// since parameter (the seq the page was built at), and follows the log
// with run.Run.Watch, as crew events --follow does, until the request
// ends.
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
	for {
		if err := sendNew(w, c); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		wctx, cancel := context.WithTimeout(ctx, keepAlive)
		err := wt.Wait(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return // the page went away
		case errors.Is(err, context.DeadlineExceeded):
			io.WriteString(w, ": keep-alive\n\n")
		case err != nil:
			// The watch failed: say so and end; the browser reconnects
			// after its retry delay, from the last seq it saw.
			fmt.Fprintf(w, "event: damage\ndata: watching the log failed: %s\n\n", oneLine(err.Error()))
			return
		}
	}
}

// sendNew writes the events the cursor has after its position, up to the
// log's end.
func sendNew(w io.Writer, c interface{ Next() (events.Event, error) }) error {
	for {
		e, err := c.Next()
		var de *events.DamageError
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case errors.As(err, &de):
			if _, err := fmt.Fprintf(w, "event: damage\ndata: %s\n\n", oneLine(de.Error())); err != nil {
				return err
			}
			continue
		case err != nil:
			fmt.Fprintf(w, "event: damage\ndata: %s\n\n", oneLine(err.Error()))
			return err
		}
		b, err := json.Marshal(rowOf(&e))
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "id: %d\nevent: crew\ndata: %s\n\n", e.Seq, b); err != nil {
			return err
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
