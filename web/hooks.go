package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/agenthook"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/agentconfig"
)

// hookHandler answers agents' HTTP hooks (Claude Code's hooks of type
// "http"): POST .../AGENT/EVENT, the hook's JSON input as the body, the
// identity in agentconfig.HeaderRun, agentconfig.HeaderTask and agentconfig.HeaderAgent. The answer is what
// crew hook AGENT EVENT prints (Answer): a 200 with the JSON object, or
// a 200 with an empty body for nothing to show; the delivery is
// recorded with events.ViaHTTPHook. A request crew cannot answer gets a
// status that is not 2xx and the reason as plain text, which Claude
// Code shows as a hook error and goes on from (as from crew hook's exit
// 1): 400 for a bad event, identity or input, 404 for an unknown
// agent (Gemini CLI's too: its hooks are commands only), run or task,
// 409 for a conflict, 500 for the rest.
//
// A message is marked delivered only once its answer was written to the
// connection and flushed (app.Deliver.Show): when the agent's
// connection closed before, or the write fails or does not end within
// answerTimeout, nothing is marked and the message is delivered at the
// agent's next moment. (A flushed answer
// is one the kernel took; a connection lost after that loses the
// answer, which the agent's next brief, at a compaction or a resume,
// lists again until the message is acknowledged.)
type hookHandler struct {
	// App returns the App that answers for an identity (required).
	App func(app.Identity) *app.App
}

// ServeHTTP implements http.Handler.
func (h hookHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	written, err := h.answer(w, r)
	if err == nil || written {
		return
	}
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, crew.ErrInvalid):
		status = http.StatusBadRequest
	case errors.Is(err, crew.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, crew.ErrConflict):
		status = http.StatusConflict
	case r.Context().Err() != nil:
		return // no one to tell
	}
	// Refused before its body was read, perhaps: closed rather than
	// drained first (refuse).
	w.Header().Set("Connection", "close")
	http.Error(w, "crew: "+err.Error(), status)
}

// answerTimeout is how long a hook's answer may take to be written to
// the agent's connection: an agent waiting for it reads it at once, so
// one that has not taken it by then (a client that does not read, or a
// connection stuck) would otherwise hold its turn (app.Deliver.Show)
// and every later hook of the same agent for ever.
var answerTimeout = 5 * time.Second

// httpAgents are the agents whose hooks crew serve answers over HTTP:
// Gemini CLI's hooks are commands only (crew setup gemini --http is
// refused).
var httpAgents = []string{"claude", "codex"}

// httpHookAgent is the agent of an HTTP hook's path: another is
// crew.ErrNotFound (404), naming those there are.
func httpHookAgent(name string) (agenthook.Agent, error) {
	a, err := agenthook.Find(name)
	switch {
	case err == nil && slices.Contains(httpAgents, name):
		return a, nil
	case err == nil:
		return a, fmt.Errorf("%s's hooks are commands only (crew hook %s EVENT), no HTTP hooks: %w", a.Title, name, crew.ErrNotFound)
	}
	return a, fmt.Errorf("unknown agent %s (%s): %w", name, strings.Join(httpAgents, ", "), crew.ErrNotFound)
}

// answer answers r; written says whether the answer reached w (an
// error after it can no longer be told).
func (h hookHandler) answer(w http.ResponseWriter, r *http.Request) (written bool, err error) {
	if r.Method != http.MethodPost {
		return false, fmt.Errorf("a hook is a POST: %w", crew.ErrInvalid)
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) < 2 {
		return false, fmt.Errorf("a hook's path ends in AGENT/EVENT, such as /hooks/claude/PostToolUse: %w", crew.ErrInvalid)
	}
	name, event := parts[len(parts)-2], parts[len(parts)-1]
	a, err := httpHookAgent(name)
	if err != nil {
		return false, err
	}
	id := app.Identity{Run: r.Header.Get(agentconfig.HeaderRun), Task: r.Header.Get(agentconfig.HeaderTask), As: r.Header.Get(agentconfig.HeaderAgent)}
	for _, v := range []struct{ kind, id, header string }{{"run", id.Run, agentconfig.HeaderRun}, {"task", id.Task, agentconfig.HeaderTask}, {"agent", id.As, agentconfig.HeaderAgent}} {
		if v.id == "" {
			continue
		}
		if err := crew.ValidateID(v.kind, v.id); err != nil {
			return false, fmt.Errorf("header %s: %w", v.header, err)
		}
	}
	in, err := agenthook.ReadInput(r.Body)
	if err != nil {
		return false, err
	}
	req, err := a.Request(event, in, events.ViaHTTPHook)
	if err != nil {
		return false, err
	}
	req.Show = func(d *app.Delivery) error {
		var body []byte
		if out := agenthook.Answer(event, in, d); out != nil {
			if body, err = json.Marshal(out); err != nil {
				return err
			}
		}
		if err := r.Context().Err(); err != nil {
			return fmt.Errorf("the agent's connection closed before its answer was written: %w", err)
		}
		written = true
		// With its length given, the answer is complete for the agent
		// once flushed: it does not wait for the record that follows.
		// An agent that does not take its answer within answerTimeout
		// is taken as gone: the write fails, nothing is recorded, and
		// the agent's turn (holdShow) goes to its next hook. (net/http
		// clears the connection's write deadline once the request is
		// done, so the next request on a keep-alive connection starts
		// without it.)
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(answerTimeout)); err != nil {
			return err
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		if _, err := w.Write(body); err != nil {
			return err
		}
		return rc.Flush()
	}
	// The delivery is recorded after the answer was flushed, and not
	// cut short by the request's end then.
	_, err = h.App(id).Deliver(context.WithoutCancel(r.Context()), req)
	return written, err
}
