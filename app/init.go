package app

import (
	"os"
	"path/filepath"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/supervise"
)

// Init is the request of Init: a file state root to create.
type Init struct {
	Dir  string    // the directory to create .crew in, or .crew itself; "" is the working directory
	Perm crew.Perm // the modes of its files (crew.PrivatePerm, crew.SharedPerm)
	// Agents is the crew's size to check the machine's limits for
	// (supervise.Limits); 0 is supervise.CrewSize.
	Agents int
}

// Initialised is the record of Init: {"dir":the state root's directory}.
type Initialised struct {
	Dir string `json:"dir"`
	// Existed tells that the state root was there already: nothing
	// changed.
	Existed bool `json:"-"`
	// Above is a state root in a directory above the new one, which
	// commands run below it found before and now no longer do; "" when
	// none.
	Above string `json:"-"`
	// Limits are the machine's limits a crew of Init.Agents agents
	// would run into (supervise.Limits).
	Limits []supervise.Limit `json:"-"`
}

// InitRoot creates a state root (run.Init), like git init DIR: a
// directory that does not exist yet is created (with the umask's modes;
// .crew itself gets req.Perm's, also when req.Dir names it). A root
// that exists is left as it is. It needs no App: there is no root yet.
func InitRoot(req Init) (*Initialised, error) {
	dir := req.Dir
	if dir == "" {
		dir = "."
	}
	parent := dir
	if filepath.Base(dir) == run.DirName {
		parent = filepath.Dir(dir)
	}
	if err := os.MkdirAll(parent, 0o777); err != nil {
		return nil, err
	}
	_, statErr := os.Stat(filepath.Join(parent, run.DirName))
	above := run.Above(dir)
	root, err := run.Init(dir, req.Perm)
	if err != nil {
		return nil, err
	}
	if statErr == nil {
		return &Initialised{Dir: root.Dir(), Existed: true, Limits: supervise.Limits(req.Agents)}, nil
	}
	return &Initialised{Dir: root.Dir(), Above: above, Limits: supervise.Limits(req.Agents)}, nil
}
