package app

import (
	"context"

	"github.com/crew-dev/crew/events"
)

// Ack is the request of Ack: messages addressed to the reader that it
// has acted on.
type Ack struct {
	Run  string   `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	IDs  []string `json:"ids" jsonschema:"the ids of the messages acted on"`
	Task string   `json:"-"` // the worker's task (default: the identity's); none: the leader
}

// Acknowledged is the record of Ack: {"acknowledged":[id, ...]}.
type Acknowledged struct {
	Acknowledged []string `json:"acknowledged"`
}

// Ack acknowledges the messages req.IDs for the reader: req.Task's
// worker (else the identity's task; a sign of its life), or the leader,
// in one event. Errors (run.Run.Acknowledge): no id or a malformed one is
// crew.ErrInvalid, an id that is not an open message of the reader
// crew.ErrNotFound, a question a task still waits on crew.ErrConflict;
// acknowledging a message already acknowledged does nothing.
func (a *App) Ack(ctx context.Context, req Ack) (*Acknowledged, error) {
	r, who, err := a.reader(req.Run, req.Task)
	if err != nil {
		return nil, err
	}
	if err := r.Acknowledge(ctx, who, req.IDs, false, ""); err != nil {
		return nil, err
	}
	return &Acknowledged{Acknowledged: req.IDs}, nil
}

// Reject is the request of Reject: a message addressed to the reader
// that it refuses.
type Reject struct {
	Run    string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	ID     string `json:"id" jsonschema:"the id of the message refused"`
	Reason string `json:"reason,omitempty" jsonschema:"why"`
	Task   string `json:"-"` // the worker's task (default: the identity's); none: the leader
}

// Rejected is the record of Reject: {"rejected":id}.
type Rejected struct {
	Rejected string `json:"rejected"`
}

// Reject refuses message req.ID for the reader (as Ack), with a reason
// its sender sees. Errors are Ack's; rejecting a message already closed
// is crew.ErrConflict.
func (a *App) Reject(ctx context.Context, req Reject) (*Rejected, error) {
	r, who, err := a.reader(req.Run, req.Task)
	if err != nil {
		return nil, err
	}
	if err := r.Acknowledge(ctx, who, []string{req.ID}, true, req.Reason); err != nil {
		return nil, err
	}
	return &Rejected{Rejected: req.ID}, nil
}

// Heartbeat is the request of Heartbeat: a worker's sign of life.
type Heartbeat struct {
	Run  string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	Task string `json:"-"` // the worker's task (default: the identity's; required)
}

// Beat is the record of Heartbeat: {"heartbeat":time,"task":id}.
type Beat struct {
	Heartbeat events.Time `json:"heartbeat"`
	Task      string      `json:"task"`
}

// Heartbeat records that the task's worker is alive, without writing to
// the run's log (run.Run.Heartbeat). No task is crew.ErrInvalid, an
// unknown one crew.ErrNotFound.
func (a *App) Heartbeat(_ context.Context, req Heartbeat) (*Beat, error) {
	id, err := a.task(req.Task)
	if err != nil {
		return nil, err
	}
	r, err := a.Run(req.Run)
	if err != nil {
		return nil, err
	}
	if err := r.Heartbeat(id); err != nil {
		return nil, err
	}
	return &Beat{Heartbeat: events.Now(), Task: id}, nil
}
