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
// The wait itself runs in a child process (the same command with
// --waiter), which hands the outcome back on a pipe: the agent is woken
// by the hook's exit, and a process that watched the file store's log
// exits only once the kernel has released its inotify instance, a grace
// period of several to tens of milliseconds (events.Watcher.Close). The
// hook, which watched nothing, exits at once; the child's exit follows
// in the background. The child ends when the hook does (its standard
// input, the hook's pipe, reaches end of file).

package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/gofrs/flock"
	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew/app"
)

// wakeExit is the wait hook's exit status when it delivers: Claude
// Code's asyncRewake wakes the session on exit 2.
const wakeExit = 2

// waiterFlag runs the child that waits (wait).
const waiterFlag = "waiter"

// errWoken is wait's outcome when it delivered: agentHook exits
// wakeExit (every other error of a hook is exit 1, which never wakes).
var errWoken = errors.New("woken")

// wait is crew hook AGENT wait: the hook's side. Under the session's
// lock it starts the waiter (waiter) and relays its outcome: the
// delivery on standard error and errWoken, nothing, or its error.
func wait(c *cli.Context, e *env, a hookAgent, in hookInput) error {
	if c.Bool(waiterFlag) {
		return waiter(c, e, a)
	}
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
	self, err := selfPath()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, append(append([]string{}, os.Args[1:]...), "--"+waiterFlag)...)
	stdin, err := cmd.StdinPipe() // the waiter's life line: closed when this process ends
	if err != nil {
		return err
	}
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	// Not the agent's standard error: an agent may wait until every
	// holder of its hook's pipes has closed them.
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		return err
	}
	// The child's exit is not waited for (it may take the inotify grace
	// period); reaped by init once this process ends.
	go cmd.Wait()
	outcome, err := io.ReadAll(bufio.NewReader(out))
	if err != nil {
		return err
	}
	verdict, text, _ := strings.Cut(string(outcome), "\n")
	switch verdict {
	case "wake":
		if _, err := fmt.Fprint(e.stderr, text); err != nil {
			return err
		}
		return errWoken
	case "done":
		return nil
	case "error":
		return errors.New(strings.TrimSpace(text))
	}
	return fmt.Errorf("the waiter (%s) ended with no outcome", self)
}

// waiter is the child of wait that waits (app.App.Wake) and writes the
// outcome on standard output, which it then closes: "wake\n" and the
// delivery, "done\n" (nothing to wait for), or "error\n" and the error.
// It gives up when its standard input, the hook's pipe, ends.
func waiter(c *cli.Context, e *env, a hookAgent) error {
	ctx, cancel := context.WithCancel(c.Context)
	defer cancel()
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	told := false
	tell := func(outcome string) error {
		told = true
		_, err := io.WriteString(e.stdout, outcome)
		if f, ok := e.stdout.(*os.File); ok {
			f.Close() // the hook reads to the end: it goes on now, not at this process's exit
		}
		return err
	}
	// The delivery is handed over as soon as it is recorded (show), its
	// projections written after.
	_, err := e.app().Wake(ctx, app.Wake{Tools: a.tools}, func(d *app.Delivery) error { return tell("wake\n" + d.Text) })
	switch {
	case told:
	case err != nil:
		tell("error\n" + message(err))
	default:
		err = tell("done\n")
	}
	return err
}

// waitLock is the lock of the wait hooks of one session (its id, none
// for an agent that gives none) of one participant: a file in a
// directory of the user's in the system's temporary directory. The
// lock (flock(2)) goes with the process that holds it, so a killed
// hook leaves none behind.
func waitLock(c *cli.Context, session string) (*flock.Flock, error) {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("crew-wait-%d", os.Getuid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
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
