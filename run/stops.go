package run

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/internal/fsys"
)

// stopBlocks is the content of workers/TASK.stops (docs/files.md): how
// many stops in a row the agent hook blocked in one session of the
// task's agent.
type stopBlocks struct {
	Session string `json:"session"`
	Blocks  int    `json:"blocks"`
}

// StopBlocks returns how many stops in a row the agent hook has blocked
// in session (the agent's session id) of task id's agent, as
// SetStopBlocks recorded it: 0 when none was recorded, or the count is
// another session's. The count is kept beside the worker's heartbeat,
// in workers/TASK.stops (docs/files.md), on the machine the agent runs
// on: it is no fact of the run, and writes no event. A file that cannot
// be read is an error (crew.ErrDamaged when it does not parse).
func (r *Run) StopBlocks(id, session string) (int, error) {
	if err := crew.ValidateID("task", id); err != nil {
		return 0, err
	}
	dir, err := r.WorkersDir(false)
	if err != nil {
		return 0, err
	}
	path := filepath.Join(dir, id+".stops")
	f, err := fsys.OpenNoFollow(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return 0, err
	}
	var s stopBlocks
	if err := json.Unmarshal(data, &s); err != nil || s.Blocks < 0 {
		return 0, fmt.Errorf("%s: not a stop count (%v); remove it: %w", path, err, crew.ErrDamaged)
	}
	if s.Session != session {
		return 0, nil
	}
	return s.Blocks, nil
}

// SetStopBlocks records that the agent hook has blocked n stops in a
// row in session of task id's agent (StopBlocks); 0 removes the record.
// The file is replaced whole (a temporary file renamed over it) and not
// synced: the count only bounds a loop of blocked stops, and one that a
// crash took back or left unreadable (StopBlocks' error, the hook's exit
// 1, which lets the agent stop) is set again at the agent's next stop
// that is not a continued one.
func (r *Run) SetStopBlocks(id, session string, n int) error {
	if err := crew.ValidateID("task", id); err != nil {
		return err
	}
	if n <= 0 {
		dir, err := r.WorkersDir(false)
		if err != nil {
			return err
		}
		if err := os.Remove(filepath.Join(dir, id+".stops")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	dir, err := r.WorkersDir(true)
	if err != nil {
		return err
	}
	data, err := json.Marshal(stopBlocks{Session: session, Blocks: n})
	if err != nil {
		return err
	}
	path := filepath.Join(dir, id+".stops")
	tmp, err := fsys.CreateTemp(dir, "."+id+".stops.tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // once renamed, there is nothing to remove
	_, err = fsys.Write(tmp, append(data, '\n'))
	if err == nil {
		err = tmp.Chmod(r.root.Perm().File)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return fsys.RenameFile(tmp.Name(), path)
}

// InTurn reports whether task id's agent is in the middle of a turn, as
// SetInTurn recorded it (workers/TASK.turn, docs/files.md): its wait
// hook then leaves follow-ups to the turn's stop (app.App.Wake).
func (r *Run) InTurn(id string) (bool, error) {
	if err := crew.ValidateID("task", id); err != nil {
		return false, err
	}
	dir, err := r.WorkersDir(false)
	if err != nil {
		return false, err
	}
	_, err = os.Lstat(filepath.Join(dir, id+".turn"))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// SetInTurn records that task id's agent started a turn (in true) or
// ended it (InTurn). The record is an empty file, neither synced nor an
// event: one a crash lost or left behind is set again at the agent's
// next prompt or stop, and meanwhile costs a follow-up its wake (it is
// delivered at the next stop) or delivers it early.
func (r *Run) SetInTurn(id string, in bool) error {
	if err := crew.ValidateID("task", id); err != nil {
		return err
	}
	dir, err := r.WorkersDir(in)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, id+".turn")
	if !in {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	f, err := fsys.OpenNoFollow(path, os.O_WRONLY|os.O_CREATE, r.root.Perm().File)
	if err != nil {
		return err
	}
	return f.Close()
}
