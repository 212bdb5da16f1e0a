package supervise

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/internal/fsys"
	"github.com/crew-dev/crew/run"
)

// WorkerLog returns the file a task's supervised worker writes its
// output to, and makes its directory: TASK.log in the run's workers
// directory (run.Run.WorkersDir: workers/ in the run's directory, or for
// a run on a server in the user's cache directory, on the machine that
// runs the worker).
func WorkerLog(r *run.Run, id string) (string, error) {
	dir, err := r.WorkersDir(true)
	if err != nil {
		return "", err
	}
	return logFile(dir, id), nil
}

// logFile is the worker log of task id in the workers directory dir.
func logFile(dir, id string) string { return filepath.Join(dir, id+".log") }

// createFile opens the file at path for appending, creating it with the
// run's file mode (run.Root.Perm, set exactly, whatever the umask) when
// missing, and never through a symbolic link (fsys.OpenNoFollow).
func createFile(r *run.Run, path string) (*os.File, error) {
	mode := r.Root().Perm().File
	f, err := fsys.OpenNoFollow(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, mode)
	if errors.Is(err, os.ErrExist) { // made meanwhile by another process
		f, err = fsys.OpenNoFollow(path, os.O_WRONLY|os.O_APPEND, mode)
	}
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm() != mode.Perm() {
		f.Chmod(mode)
	}
	return f, nil
}

// OpenWorkerLog opens task id's worker log on this machine (WorkerLog's
// file) for reading, making nothing and never through a symbolic link:
// what crew serve shows on a task's page. A task whose worker never ran
// here has none: an error wrapping crew.ErrNotFound.
func OpenWorkerLog(r *run.Run, id string) (*os.File, error) {
	dir, err := r.WorkersDir(false)
	if err != nil {
		return nil, err
	}
	f, err := fsys.OpenNoFollow(logFile(dir, id), os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no worker log of task %s on this machine: %w", id, crew.ErrNotFound)
	}
	return f, err
}
