// crew hook claude wait: the hook that wakes an idle Claude Code
// session. crew setup claude registers it as an asyncRewake command hook
// (https://code.claude.com/docs/en/hooks: the hook runs in the
// background, and when it exits 2 Claude is woken, even when the
// session is idle, and shown its standard error) on SessionStart, Stop
// and UserPromptSubmit. It waits for the agent's mail (app.App.Wake, the
// wake ask --wait uses) and exits 2 with the delivery on standard error,
// in the words of the PostToolUse delivery; it exits 0 when there is
// nothing to wait for (the task ended). One waits per session: a lock
// per session, held while it waits, makes every other exit 0 at once,
// so arming it at each stop and prompt re-arms it after a wake.
//
// The wait runs in the hook's own process. It once ran in a child
// process that handed the outcome back on a pipe, because a process that
// had watched the file store's log with inotify exited only once the
// kernel released the instance (~10 ms). The wait now blocks on a
// wake-up FIFO of its own (run.Run.Watch with the participant; no
// inotify), and the child bought at most a millisecond at the median:
// wake_agent_ms p50/p99 in paired runs (load 6-7 on 2 cores), child
// against none, 5.24/40.65 against 6.19/30.23, 5.53/51.50 against
// 5.69/18.68, 3.26/7.46 against 3.57/8.45 (the hook now exits after the
// delivery's projections are written, not before). And the child's pipe
// raced: the hook's read could find it closed by the goroutine reaping
// the child, exit 1, and not wake the agent (once in 200 wake-ups).

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gofrs/flock"
	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/internal/fsys"
)

// wakeExit is the wait hook's exit status when it delivers: Claude
// Code's asyncRewake wakes the session on exit 2.
const wakeExit = 2

// errWoken is wait's outcome when it delivered: agentHook exits
// wakeExit (every other error of a hook is exit 1, which never wakes).
var errWoken = errors.New("woken")

// wait is crew hook AGENT wait: under the session's lock it waits for
// the agent's mail (app.App.Wake) and writes the delivery on standard
// error as soon as it is recorded (its projections written after), then
// returns errWoken; nil when there is nothing to wait for, or another
// waits for this session.
func wait(c *cli.Context, e *env, a hookAgent, in hookInput) error {
	lock, err := waitLock(c, in.SessionID)
	if err != nil {
		return err
	}
	held, err := lock.TryLock()
	if err != nil {
		return err
	}
	if !held {
		return nil // another waits for this session
	}
	defer lock.Unlock()
	woken := false
	_, err = e.app().Wake(c.Context, app.Wake{Tools: a.Tools}, func(d *app.Delivery) error {
		woken = true
		_, err := fmt.Fprint(e.stderr, d.Text)
		return err
	})
	if err == nil && woken {
		return errWoken
	}
	return err
}

// waitLock is the lock of the wait hooks of one session (its id, none
// for an agent that gives none) of one participant: a file in a
// directory of the user's in the system's temporary directory
// (waitLockDir). The lock (flock(2)) goes with the process that holds
// it, so a killed hook leaves none behind.
func waitLock(c *cli.Context, session string) (*flock.Flock, error) {
	dir, err := waitLockDir()
	if err != nil {
		return nil, err
	}
	wd, _ := os.Getwd()
	key := strings.Join([]string{session, c.String("dir"), c.String("store"), wd, c.String("run"), c.String("task"), c.String("as")}, "\x00")
	if session != "" {
		// The session's id names it: its hooks may start in another
		// directory after a cd.
		key = strings.Join([]string{session, c.String("store"), c.String("run"), c.String("task"), c.String("as")}, "\x00")
	}
	sum := sha256.Sum256([]byte(key))
	return flock.New(filepath.Join(dir, hex.EncodeToString(sum[:12])+".lock")), nil
}

// waitLockDir is the directory of the wait hooks' locks,
// crew-wait-UID in the system's temporary directory, made 0700 if
// there is none. Anyone may make that name in a shared /tmp first: one
// that is not a real directory of the user's (a symbolic link, another
// user's directory) or that others may write to is refused, since who
// could write there could hold a session's lock, and the wait hook
// would then exit 0 at once and never wake the agent.
func waitLockDir() (string, error) {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("crew-wait-%d", os.Geteuid()))
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	uid, ok := fsys.Owner(fi)
	switch {
	case !fi.IsDir():
		return "", fmt.Errorf("wait hook's lock directory %s is not a directory (%s): remove it: %w", dir, fi.Mode().Type(), crew.ErrTampered)
	case ok && uid != os.Geteuid():
		return "", fmt.Errorf("wait hook's lock directory %s belongs to user %d, not to you: remove it: %w", dir, uid, crew.ErrTampered)
	case ok && fi.Mode().Perm()&0o077 != 0:
		return "", fmt.Errorf("wait hook's lock directory %s has mode %s, others may use it: make it 0700 or remove it: %w", dir, fi.Mode().Perm(), crew.ErrTampered)
	}
	return dir, nil
}
