package app

import (
	"errors"
	"fmt"
	"strings"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/state"
)

// Explain adds to err what the identity can tell of it, and returns it:
// for a task the run does not hold (*state.NoTaskError) and whose id is
// not near one it holds, when the root has other runs, that the run was taken as the newest because the
// identity names none, and which
// other runs hold a task of that id (or one differing only in letter
// case). Any other error is returned as it is. A front end calls it on
// the error of an operation it ran for this identity.
func (a *App) Explain(err error) error {
	var nt *state.NoTaskError
	if !errors.As(err, &nt) || nt.Run == "" || nt.Hint != "" || nt.Near != "" {
		return err
	}
	root, rerr := a.root()
	if rerr != nil {
		return err
	}
	runs, _, lerr := root.List()
	if lerr != nil || len(runs) < 2 {
		return err
	}
	var hints []string
	if t := a.Taken(); t != nil && t.Run == nt.Run {
		hints = append(hints, fmt.Sprintf("run %s was taken as the newest run, since no run was given", nt.Run))
	}
	for _, m := range runs {
		if m.ID == nt.Run {
			continue
		}
		r, oerr := root.Open(m.ID)
		if oerr != nil {
			continue
		}
		st, serr := r.TaskState()
		if serr != nil {
			continue
		}
		for id := range st.Tasks {
			if crew.SameID(id, nt.ID) {
				hints = append(hints, fmt.Sprintf("task %s is in run %s", id, m.ID))
			}
		}
	}
	nt.Hint = strings.Join(hints, "; ")
	return err
}
