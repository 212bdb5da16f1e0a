package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/store"
)

// Events is the request of Events: a run's event log.
type Events struct {
	Run   string   `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	Since int64    `json:"since,omitempty" jsonschema:"only events with seq greater than this"`
	Types []string `json:"types,omitempty" jsonschema:"only events of these types, e.g. task.waiting, message.sent"`
	// Follow waits at the end of the log for more events, until ctx
	// ends.
	Follow bool `json:"-"`
}

// ErrStop, returned by the callback of Events or Watch, ends the
// operation without an error.
var ErrStop = errors.New("stop")

// Events calls fn with each event of the run's log after req.Since, in
// order, only those of req.Types when any are given (an unknown type is
// crew.ErrInvalid). warn, when not nil, is told of a Since past the log's
// end and of each damaged place, which is skipped; after the end of the
// log, damage is an error wrapping crew.ErrDamaged that counts the
// places. An error from fn ends it and is returned (ErrStop: nil).
func (a *App) Events(ctx context.Context, req Events, warn func(error), fn func(*events.Event) error) error {
	r, err := a.Run(req.Run)
	if err != nil {
		return err
	}
	for _, t := range req.Types {
		if !slices.Contains(events.Types, t) {
			return fmt.Errorf("unknown event type %q; types are %s: %w", t, strings.Join(events.Types, ", "), crew.ErrInvalid)
		}
	}
	a.SignOfLife(r)
	if req.Since > 0 {
		st, err := r.TaskState()
		if err != nil {
			return err
		}
		warnPastEnd(warn, r, req.Since, st.Seq)
	}
	cur, err := r.Events(req.Since)
	if err != nil {
		return err
	}
	defer cur.Close()
	var wait func() error // nil: stop at the end of the log
	if req.Follow {
		w := r.Watch()
		defer w.Close()
		wait = func() error { return w.Wait(ctx) }
	}
	damaged, err := eachEvent(cur, wait, warn, func(ev *events.Event) error {
		if len(req.Types) > 0 && !slices.Contains(req.Types, ev.Type) {
			return nil
		}
		return fn(ev)
	})
	if err != nil {
		return err
	}
	if damaged > 0 {
		return fmt.Errorf("%s in %s; what could be read was printed; run crew repair: %w", human.Count(damaged, "damaged place"), r.Log(), crew.ErrDamaged)
	}
	return nil
}

// eachEvent calls fn with each event of cur, in order (Events and
// Watch). A damaged place is handed to warn (when not nil) and counted,
// and skipped unless an event comes with it (the one after a seq gap).
// At the end of the log it calls wait, which returns when more may have
// come, and goes on; with wait nil it returns there. fn returning
// ErrStop ends it without an error.
func eachEvent(cur store.Cursor, wait func() error, warn func(error), fn func(*events.Event) error) (damaged int, err error) {
	for {
		err := cur.Scan(func(de *events.DamageError) {
			if warn != nil {
				warn(de)
			}
			damaged++
		}, fn)
		if err == ErrStop {
			return damaged, nil
		}
		if err != nil || wait == nil {
			return damaged, err
		}
		if err := wait(); err != nil {
			return damaged, err
		}
	}
}
