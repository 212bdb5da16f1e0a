package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
)

// sendOp is the operation of a task action that sends a message (the
// commands crew respond, steer, follow-up and nudge), nil for another
// action.
func (s *Server) sendOp(action string) func(context.Context, app.ToWorker) (*events.Message, error) {
	switch action {
	case "respond":
		return s.app.Respond
	case "steer":
		return s.app.Steer
	case "follow-up":
		return s.app.FollowUp
	case "nudge":
		return func(ctx context.Context, req app.ToWorker) (*events.Message, error) {
			return s.app.Nudge(ctx, app.Nudge(req))
		}
	}
	return nil
}

// moveOp is the operation of a task action that moves a task (crew task
// cancel, crew task retry), nil for another action.
func (s *Server) moveOp(action string) func(context.Context, app.TaskMove) (*app.TaskRecord, error) {
	switch action {
	case "cancel":
		return s.app.TaskCancel
	case "retry":
		return s.app.TaskRetry
	}
	return nil
}

// taskAction carries out an action on one task: a message (sendOp,
// through package app as the command line and crew mcp send) or a
// transition (moveOp), both through package app as the command line
// and crew mcp move tasks, recorded with the server's actor. It returns to
// the page the form came from with the outcome or the error.
func (s *Server) taskAction(w http.ResponseWriter, r *http.Request) {
	rn, err := s.open(r.PathValue("run"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id, action := r.PathValue("task"), r.PathValue("action")
	if err := crew.ValidateID("task", id); err != nil {
		s.fail(w, r, err)
		return
	}
	var text string
	switch send, move := s.sendOp(action), s.moveOp(action); {
	case send != nil:
		var m *events.Message
		m, err = send(r.Context(), app.ToWorker{Run: rn.ID(), Task: id, Body: formBody(r), Priority: r.PostFormValue("priority")})
		if err == nil {
			text = fmt.Sprintf("%s sent to %s as %s (seq %d, message %s)", m.Kind, id, m.From, m.Seq, m.ID)
		}
	case move != nil:
		var t *app.TaskRecord
		actor := s.actorFor(rn)
		t, err = move(r.Context(), app.TaskMove{Run: rn.ID(), Task: id, Reason: r.PostFormValue("reason"), As: actor})
		if err == nil {
			text = fmt.Sprintf("%s is %s (by %s)", id, t.Status, actor)
		}
	default:
		s.fail(w, r, fmt.Errorf("no action %q on a task: %w", action, crew.ErrNotFound))
		return
	}
	s.done(w, r, rn, action, text, err)
}

// broadcast sends a message to every task of the run that has not ended
// (crew broadcast).
func (s *Server) broadcast(w http.ResponseWriter, r *http.Request) {
	rn, err := s.open(r.PathValue("run"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	m, err := s.app.Broadcast(r.Context(), app.Broadcast{Run: rn.ID(), Body: formBody(r), Priority: r.PostFormValue("priority")})
	text := ""
	if err == nil {
		text = fmt.Sprintf("broadcast sent as %s (seq %d, message %s)", m.From, m.Seq, m.ID)
	}
	s.done(w, r, rn, "broadcast", text, err)
}

// ack acknowledges messages addressed to the leader (crew ack): the
// form's "id" values.
func (s *Server) ack(w http.ResponseWriter, r *http.Request) {
	rn, err := s.open(r.PathValue("run"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ids := r.PostForm["id"]
	_, err = s.app.Ack(r.Context(), app.Ack{Run: rn.ID(), IDs: ids})
	s.done(w, r, rn, "acknowledge", "acknowledged "+strings.Join(ids, ", "), err)
}

// done returns to the page the form came from (303) with the outcome of
// the action, or its error, to show once.
func (s *Server) done(w http.ResponseWriter, r *http.Request, rn *run.Run, action, text string, err error) {
	ok := err == nil
	if !ok {
		text = action + " refused: " + err.Error()
		if errors.Is(err, crew.ErrDamaged) {
			text += " (the log is damaged: run crew repair)"
		}
	}
	key := s.putFlash(ok, text)
	to := back(r, rn.ID())
	http.Redirect(w, r, to+"?flash="+url.QueryEscape(key), http.StatusSeeOther)
}

// formBody is the form's body field with the line breaks a browser
// sends (CRLF) turned back into the LF a terminal would have sent.
func formBody(r *http.Request) string {
	return strings.ReplaceAll(r.PostFormValue("body"), "\r\n", "\n")
}
