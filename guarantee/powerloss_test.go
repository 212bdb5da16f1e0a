//go:build linux

package guarantee

// Guarantee 1 (docs/guarantees.md, 1. Durable on success) under power loss: an operation that
// returned success survives a power cut, and what a power cut leaves is
// either clean or reported as damage that crew repair mends, losing
// nothing acknowledged.
//
// TestKill9 kills processes; the page cache survives that, so it tests
// crew's write order. Here the state root is on LazyFS
// (lazyfs_linux_test.go), which keeps file data in a cache of its own
// until fsync(2) and loses the rest at a cut, while operations on names
// (create, link, rename, unlink) reach the disk at once: an unsynced
// mail-tree copy survives as an empty file under its final name, tasks.json
// (rewritten by rename) as an empty file, a mailbox file as what was last
// fsynced of it (nothing). Real crew processes (the binary make build
// builds) write side by side — steer, respond, ask, task add/start/complete,
// inbox and ack, report, outbox and ack, mail send, run create — and at a
// random moment, in one cut in three just after a write to the log, the
// power goes: either LazyFS is killed at once (a fsync under way may be cut
// short), or every crew process is frozen, LazyFS drops what was not
// fsynced (lazyfs::clear-cache) and is killed. Every crew process is then
// killed, the file system unmounted and mounted again, and the test checks:
//
//   - every operation that exited 0 is in the log exactly once (messages
//     by body; tasks created and completed; acknowledgements), seq dense;
//     each mail sent is whole in its recipient's directory, once; each run
//     created has a log that starts with its one run.created;
//   - every reader (crew events, pending, task list, mail check, run
//     report, inbox) exits 0 and prints whole JSON records, or exits 7
//     naming the damage; then crew repair exits 0, and those readers 0;
//   - no writer is stuck: after every cut, a steer (the run lock and
//     tasks.json's spare file), a mail send (the mail tree), a run create
//     (the runs lock, a half-made run directory) and in turn the other
//     kinds finish within a deadline, each with an exit code it may have;
//   - after them (and repair), r1's projections agree with its log: each
//     mailbox file holds exactly its messages; each message is in its
//     recipient's mail tree once, whole, with the read flag the log gives
//     it, and the tree holds nothing else but sent mail; tasks.json
//     reflects the whole log. When a state root is done, its projections
//     equal a rebuild from its log alone.
//
// One allowance, for LazyFS rather than crew: its truncate handler
// (lfs_truncate in lazyfs.cpp) returns an uninitialised local, so now and
// then an ftruncate(2) fails with a stale errno (ENOENT), which no POSIX
// file system does for an open file. When it hits the truncation of
// tasks.json's spare, crew leaves tasks.json as it was, as designed for a
// snapshot it could not write (readers replay the log after it; one that
// is not whole, as a cut leaves it, is rebuilt from the log), and exits 0:
// a tasks.json behind the log but true to it up to its seq, or not whole,
// is accepted for up to plLateWriters writers in a row, each checked like
// the others, and then must be current. crew repair reports the failure
// (exit 1, "truncate .tasks.json.spare: no such file or directory") and is
// run again, up to as many times; a writer that fails so is not counted
// as a failure (none has been seen to: writers leave tasks.json behind).
//
// Several state roots, each on its own LazyFS, are cut side by side
// (lanes); a lane starts a new state root every cutsPerRoot cuts.
// CREW_POWERLOSS_CUTS sets the number of cuts in all (default 100; make
// powerloss runs more), CREW_POWERLOSS_LANES the lanes (default 3).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	cutsEnv  = "CREW_POWERLOSS_CUTS"
	lanesEnv = "CREW_POWERLOSS_LANES"

	// cutsPerRoot is how many cuts one state root takes before its lane
	// starts a new one. No mail-tree copy is fsynced, so after every cut
	// every copy of the root is empty again and is written again: a
	// root's size is bounded to keep the time that takes small.
	cutsPerRoot = 8
	// lazyfsCacheMB is LazyFS's cache: a few per cent of it is in use at
	// a cut (the suite fails past half: a full cache writes through).
	lazyfsCacheMB = 2
	// plLateWriters is how many writers in a row may leave tasks.json
	// behind the log because LazyFS failed their ftruncate of its spare.
	plLateWriters = 5
	// stuckAfter is how long an operation may take after a cut before it
	// counts as stuck (a lock never released, a spare file never usable).
	stuckAfter = 60 * time.Second
)

// envInt returns the integer in environment variable name, or def.
func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// plStats counts what the cuts did and found, for the test log: evidence
// that the dangerous states were reached.
type plStats struct {
	cuts, frozenCuts, afterLogWrite int // cuts; of which with the writers frozen and the cache cleared; just after a write to the log
	ops                             map[string]int
	inFlight                        int // crew processes running at a cut
	tornLog                         int // cuts after which the log ended in a torn line
	emptyCopies, emptyProjections   int // mail-tree copies, and tasks.json/open.jsonl/mailbox files, left without their data
	damagedReaders                  map[string]int
	readersFirst                    int // cuts after which the readers ran first; the others ran the writers first
	damagedFirst                    int // cuts after which a reader run first exited 7
	damagedAfterWriters             int // cuts after which a reader run after the writers exited 7
	repairs                         int
	lateSnapshots                   int // tasks.json left behind by writers that exited 0 (LazyFS's ftruncate), caught up by a later one
	markedCuts                      int // cuts in a root of many tasks after which tasks.json was behind and the projection mark at the log's end
	lazyTruncates                   int // crew processes that exited 1 because LazyFS failed an ftruncate (repair, retried)
	checked                         int // operations that exited 0, checked after a cut (each counted once per cut)
	cacheUsage                      int // the most of LazyFS's cache in use at a cut, in percent
}

func (s *plStats) add(o *plStats) {
	s.cuts += o.cuts
	s.frozenCuts += o.frozenCuts
	s.afterLogWrite += o.afterLogWrite
	s.inFlight += o.inFlight
	s.tornLog += o.tornLog
	s.emptyCopies += o.emptyCopies
	s.emptyProjections += o.emptyProjections
	s.repairs += o.repairs
	s.readersFirst += o.readersFirst
	s.damagedFirst += o.damagedFirst
	s.damagedAfterWriters += o.damagedAfterWriters
	s.lateSnapshots += o.lateSnapshots
	s.markedCuts += o.markedCuts
	s.lazyTruncates += o.lazyTruncates
	s.checked += o.checked
	s.cacheUsage = max(s.cacheUsage, o.cacheUsage)
	for k, v := range o.ops {
		s.ops[k] += v
	}
	for k, v := range o.damagedReaders {
		s.damagedReaders[k] += v
	}
}

func newStats() *plStats {
	return &plStats{ops: map[string]int{}, damagedReaders: map[string]int{}}
}

// TestPowerLoss: see the top of this file.
func TestPowerLoss(t *testing.T) {
	lazyfs := lazyfsOrSkip(t)
	cuts := envInt(t, cutsEnv, 100)
	lanes := min(envInt(t, lanesEnv, 3), cuts)
	// Can LazyFS mount here at all (a container may refuse FUSE mounts)?
	probe := newLazyFS(t, lazyfs, 1)
	if err := probe.mount(); err != nil {
		t.Skipf("skipped: LazyFS cannot mount here: %v", err)
	}
	probe.kill()
	if err := probe.unmount(); err != nil {
		t.Fatal(err)
	}
	bin := plBuild(t)
	start := time.Now()
	total := newStats()
	var mu sync.Mutex
	var wg sync.WaitGroup
	skipped, skippedLanes := 0, 0 // the cuts lanes that ended skipped (plT) did not make
	for i := range lanes {
		n := cuts / lanes
		if i < cuts%lanes {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(fmt.Sprintf("lane%d", i), func(t *testing.T) {
				st := newStats()
				defer func() { // also after a skip or a failure: the cuts made count
					mu.Lock()
					defer mu.Unlock()
					total.add(st)
					if t.Skipped() { // LazyFS failed on its own: not crew's missing cuts
						skipped += n - st.cuts
						skippedLanes++
					}
				}()
				runLane(t, lazyfs, bin, i, n, st)
			})
		}()
	}
	wg.Wait()
	var ops []string
	n := 0
	for k, v := range total.ops {
		ops = append(ops, fmt.Sprintf("%s %d", k, v))
		n += v
	}
	sort.Strings(ops)
	var dmg []string
	for k, v := range total.damagedReaders {
		dmg = append(dmg, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(dmg)
	lost := "none lost"
	if t.Failed() {
		lost = "failures above"
	}
	t.Logf("%d power cuts in %d lanes in %s (%d with the writers frozen and LazyFS's cache cleared first, %d just after a write to the log); "+
		"%d operations exited 0 (%s), %d checks of them after cuts, %s; %d crew processes cut short; "+
		"after the cuts: a torn log tail %d times, %d mail-tree copies and %d other projections without their data; "+
		"readers exiting 7 (damage named, then crew repair): %s, after %d of the %d cuts checked by readers first and %d of the %d checked after the next writers; %d repairs; "+
		"LazyFS's failed ftruncate of tasks.json's spare: %d writers left tasks.json behind (caught up by the next), %d processes exited 1 (repair, retried); "+
		"in roots of %d tasks, tasks.json behind the projection mark after %d cuts; LazyFS's cache at most %d%% full",
		total.cuts, lanes, time.Since(start).Round(time.Millisecond), total.frozenCuts, total.afterLogWrite,
		n, strings.Join(ops, ", "), total.checked, lost, total.inFlight,
		total.tornLog, total.emptyCopies, total.emptyProjections, strings.Join(dmg, ", "), total.damagedFirst, total.readersFirst, total.damagedAfterWriters, total.cuts-total.readersFirst, total.repairs, total.lateSnapshots, total.lazyTruncates, 3+plPendingTasks, total.markedCuts, total.cacheUsage)
	if skipped > 0 {
		t.Logf("%d cuts were not made: lanes ended skipped when LazyFS failed on its own (go test -v shows why)", skipped)
	}
	if skippedLanes == lanes {
		t.Fatalf("LazyFS failed on its own in every lane: the power cuts prove nothing this time")
	}
	if !t.Failed() && total.cuts < cuts-skipped {
		t.Fatalf("only %d of %d cuts were made", total.cuts, cuts-skipped)
	}
}

// plBuild builds the crew binary as make build does (static, without
// urfave/cli's man-page generator), which starts in about half the time
// of a plain go build: the suite starts thousands of crew processes.
func plBuild(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "crew")
	cmd := exec.Command("go", "build", "-tags", "urfave_cli_no_docs", "-o", bin, "./cmd/crew")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/crew: %v\n%s", err, out)
	}
	return bin
}

// lazyTruncate reports whether a crew process's stderr says an
// ftruncate(2) failed with ENOENT: LazyFS's bug (see the top of the file),
// as crew repair reports it when the truncation of tasks.json's spare
// fails.
func lazyTruncate(stderr string) bool {
	return strings.Contains(stderr, "truncate ") && strings.Contains(stderr, ": no such file or directory")
}

// plRun is the run every lane's messages go to.
const plRun = "r1"

// plLane is one state root on one LazyFS, cut over and over.
type plLane struct {
	t     *plT
	id    int
	fs    *lazyFS
	bin   string // the crew binary (plBuild)
	dir   string // holds .crew, under the mount point
	rng   *rand.Rand
	stats *plStats

	mu      sync.Mutex
	stopped bool               // a cut has begun: start no more processes
	procs   map[*exec.Cmd]bool // crew processes running
	fails   []string           // operations that ended badly (an exit code they may not have, before a cut; stuck)
	seq     int                // numbers names
	said    []string           // what the writers after the last cut wrote on stderr
	wait    func()             // waits for the window's writers
	watch   <-chan struct{}    // writes to r1's log, during a window
	unwatch func()

	// What exited 0, and must survive every later cut.
	msgs      []string          // "op:task body" (checkRecorded)
	added     map[string]bool   // task add
	completed map[string]bool   // task complete
	acked     map[string]string // message id -> who acknowledged it (a task id, or leader)
	mails     map[string]string // mail send: message id -> recipient
	runs      map[string]bool   // run create
}

// runLane makes n cuts on a new LazyFS, counting what it sees in st as it
// goes: a lane that ends early (skipped, failed) leaves what it counted.
func runLane(t *testing.T, lazyfs, bin string, id, n int, st *plStats) {
	fs := newLazyFS(t, lazyfs, lazyfsCacheMB)
	l := &plLane{t: &plT{T: t, fs: fs}, id: id, bin: bin, fs: fs, stats: st,
		rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(id)))}
	if err := l.fs.mount(); err != nil {
		t.Fatal(err)
	}
	for cut := range n {
		if cut%cutsPerRoot == 0 {
			if cut > 0 {
				l.checkRebuild()
			}
			l.newRoot(fmt.Sprintf("root%d", cut/cutsPerRoot), cut/cutsPerRoot%2 == 1)
		}
		l.window(cut)
		l.cut(cut)
		if err := l.fs.mount(); err != nil {
			t.Fatalf("cut %d: mount again: %v", cut, err)
		}
		l.verify(cut)
	}
	l.checkRebuild()
	l.fs.kill()
	if err := l.fs.unmount(); err != nil {
		t.Error(err)
	}
}

// plPendingTasks is how many pending tasks every other root holds besides
// t1, t2 and t3: enough that tasks.json is written only every 2 events,
// and the projection mark says how far projections got between
// (docs/files.md, Snapshots).
const plPendingTasks = 29

// newRoot starts a new state root under the mount point: run r1 with tasks
// t1, t2 and t3 started and, with many, plPendingTasks pending ones;
// nothing recorded yet.
func (l *plLane) newRoot(name string, many bool) {
	t := l.t
	l.dir = filepath.Join(l.fs.mnt, name)
	if err := os.Mkdir(l.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	l.msgs = nil
	l.added, l.completed, l.runs = map[string]bool{}, map[string]bool{}, map[string]bool{}
	l.acked, l.mails = map[string]string{}, map[string]string{}
	crew(t, l.dir, "init")
	crew(t, l.dir, "run", "create", "--id", plRun)
	for _, task := range []string{"t1", "t2", "t3"} {
		crew(t, l.dir, "task", "add", task, "--run", plRun)
		crew(t, l.dir, "task", "start", task, "--run", plRun)
	}
	if many {
		for i := range plPendingTasks {
			crew(t, l.dir, "task", "add", fmt.Sprintf("q%d", i+1), "--run", plRun)
		}
	}
}

// randN returns a random number in [0, n) (writers draw side by side).
func (l *plLane) randN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rng.IntN(n)
}

// next returns a new name with prefix p, unique in the lane.
func (l *plLane) next(p string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	return fmt.Sprintf("%s%d-%d", p, l.id, l.seq)
}

// plResult is one crew process's end.
type plResult struct {
	stdout, stderr string
	code           int  // -1: ended by a signal
	ran            bool // false: not started, a cut had begun
	afterCut       bool // it ended after a cut had begun
	timedOut       bool // killed after the timeout: stuck
}

// plFSHang is how long a crew process killed for its timeout may take to
// end before LazyFS is taken to have hung: a killed process ends at once
// unless it waits in the kernel for an answer of the FUSE daemon.
const plFSHang = 20 * time.Second

// plT is a lane's *testing.T. A lane that would fail after LazyFS failed
// on its own (it hung, or ended without being killed:
// lazyFS.failedOnItsOwn) ends skipped instead, saying so and what it
// would have reported: LazyFS is the test's power switch, and a fault of
// its own is not crew's. The cuts done before count (TestPowerLoss's
// totals), and the other lanes go on.
type plT struct {
	*testing.T
	fs *lazyFS
}

// Fatalf is testing.T's, or the skip above.
func (t *plT) Fatalf(format string, args ...any) {
	t.Helper()
	if why := t.fs.failedOnItsOwn(); why != "" {
		t.Skipf("LazyFS failed on its own, not crew: %s\n%s\nthis lane ends here; it would have reported: %s", why, t.fs.logTail(), fmt.Sprintf(format, args...))
	}
	t.T.Fatalf(format, args...)
}

// crew runs one crew process in the lane's root, registered so that a cut
// can freeze and kill it; none starts once a cut has begun. With a
// timeout, a process still running then is killed and reported as stuck.
func (l *plLane) crew(timeout time.Duration, args ...string) plResult {
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, l.bin, args...)
	cmd.Dir, cmd.Env = l.dir, crewEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return plResult{}
	}
	if err := cmd.Start(); err != nil {
		l.fails = append(l.fails, fmt.Sprintf("start crew %s: %v", strings.Join(args, " "), err))
		l.mu.Unlock()
		return plResult{}
	}
	l.procs[cmd] = true
	l.mu.Unlock()
	exited := make(chan struct{})
	if timeout > 0 {
		go func() {
			select {
			case <-exited:
			case <-ctx.Done(): // killed (exec.CommandContext)
				select {
				case <-exited:
				case <-time.After(plFSHang):
					l.fs.hung(fmt.Sprintf("crew %s, killed after %v, had not ended %v later", strings.Join(args, " "), timeout, plFSHang))
				}
			}
		}()
	}
	err := cmd.Wait()
	close(exited)
	l.mu.Lock()
	delete(l.procs, cmd)
	res := plResult{stdout: stdout.String(), stderr: stderr.String(), ran: true, afterCut: l.stopped, timedOut: ctx.Err() != nil}
	l.mu.Unlock()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.code = ee.ExitCode()
	} else if err != nil {
		res.code = -1
	}
	return res
}

// plOp is one writer operation: crew's arguments, the exit codes allowed
// besides 0 (other writers change the same task), what to record once it
// exited 0 (called under l.mu), and the operation that follows a success
// (task start after task add, ack after inbox).
type plOp struct {
	kind    string
	args    []string
	allowed string
	ok      func(stdout string)
	then    func() *plOp
}

// turn returns one turn of writer w's operations; every turn of writer 2
// creates a run when allRuns, one in three otherwise.
func (l *plLane) turn(w int, allRuns bool) []*plOp {
	msg := func(op, task string) *plOp {
		b := l.next(fmt.Sprintf("L%d-w%d-", l.id, w))
		args := []string{op, task, b, "--run", plRun}
		if op == "ask" || op == "report" {
			args = []string{op, b, "--task", task, "--run", plRun}
		}
		allowed := ""
		if op == "ask" || op == "respond" {
			allowed = "3" // t3 is waiting already (ask), or not waiting (respond)
		}
		return &plOp{kind: op, args: args, allowed: allowed, ok: func(string) { l.msgs = append(l.msgs, op+":"+task+" "+b) }}
	}
	switch w {
	case 0:
		b := l.next(fmt.Sprintf("L%d-mail-", l.id))
		return []*plOp{msg("steer", "t1"), msg("steer", "t2"),
			{kind: "mail send", args: []string{"mail", "send", "--to", "t2", "--from", "sender", b},
				ok: func(stdout string) { l.mails[strings.TrimSpace(stdout)] = "t2" }}}
	case 1:
		return []*plOp{msg("ask", "t3"), msg("respond", "t3")}
	case 2:
		task := l.next("p")
		complete := &plOp{kind: "task complete", args: []string{"task", "complete", task, "--run", plRun},
			ok: func(string) { l.completed[task] = true }}
		start := &plOp{kind: "task start", args: []string{"task", "start", task, "--run", plRun},
			then: func() *plOp { return complete }}
		ops := []*plOp{{kind: "task add", args: []string{"task", "add", task, "--run", plRun},
			ok: func(string) { l.added[task] = true }, then: func() *plOp { return start }}}
		if allRuns || l.randN(3) == 0 {
			id := l.next("run")
			ops = append(ops, &plOp{kind: "run create", args: []string{"run", "create", "--id", id},
				ok: func(string) { l.runs[id] = true }})
		}
		return ops
	default:
		return []*plOp{l.readAndAck("t1"), msg("report", "t2"), l.readAndAck("")}
	}
}

// readAndAck is an operation that reads task's messages (crew inbox), or
// the leader's (crew outbox) for task "", and then acknowledges those it
// got.
func (l *plLane) readAndAck(task string) *plOp {
	args := []string{"outbox", "--json", "--run", plRun}
	who, kind := "leader", "outbox"
	if task != "" {
		args = []string{"inbox", "--task", task, "--json", "--run", plRun}
		who, kind = task, "inbox"
	}
	var ids []string
	ack := func() *plOp {
		if len(ids) == 0 {
			return nil
		}
		a := append([]string{"ack", "--run", plRun}, ids...)
		if task != "" {
			a = append(a, "--task", task)
		}
		return &plOp{kind: "ack", args: a, ok: func(string) {
			for _, id := range ids {
				l.acked[id] = who
			}
		}}
	}
	return &plOp{kind: kind, args: args, then: ack, ok: func(stdout string) {
		for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
			var m struct{ ID, Kind string }
			// A question is closed by its response; acknowledging one a
			// task still waits on is a conflict.
			if json.Unmarshal([]byte(line), &m) == nil && m.ID != "" && m.Kind != "question" && len(ids) < 20 {
				ids = append(ids, m.ID)
			}
		}
	}}
}

// run runs op and what follows it, and records what exited 0. An exit
// code it may not have, before a cut began, is a failure, and so (with a
// timeout) is a process still running after it: stuck.
func (l *plLane) run(op *plOp, timeout time.Duration) {
	for op != nil {
		res := l.crew(timeout, op.args...)
		if !res.ran {
			return
		}
		l.mu.Lock()
		switch {
		case res.timedOut:
			l.fails = append(l.fails, fmt.Sprintf("crew %s is stuck: still running after %s\nstderr: %s", strings.Join(op.args, " "), timeout, res.stderr))
		case res.code == 1 && lazyTruncate(res.stderr):
			l.stats.lazyTruncates++ // not a success, so not looked for; nothing else to say
		case res.code != 0 && !res.afterCut && (res.code < 0 || !strings.Contains(op.allowed, strconv.Itoa(res.code))):
			l.fails = append(l.fails, fmt.Sprintf("crew %s: exit %d\nstderr: %s", strings.Join(op.args, " "), res.code, res.stderr))
		case res.code == 0:
			if timeout > 0 && res.stderr != "" {
				l.said = append(l.said, "crew "+strings.Join(op.args, " ")+": "+res.stderr)
			}
			l.stats.ops[op.kind]++
			if op.ok != nil {
				op.ok(res.stdout)
			}
		}
		l.mu.Unlock()
		if res.code != 0 || op.then == nil {
			return
		}
		op = op.then()
	}
}

// failures fails the test with the operations that ended badly.
func (l *plLane) failures(when string) {
	l.mu.Lock()
	fails := l.fails
	l.fails = nil
	l.mu.Unlock()
	if len(fails) > 0 {
		l.t.Fatalf("%s: %d operations failed; first ones:\n%s", when, len(fails), strings.Join(fails[:min(len(fails), 5)], "\n"))
	}
}

// window starts four writers, each running its turns over and over
// until the cut.
func (l *plLane) window(cut int) {
	l.mu.Lock()
	l.stopped, l.procs = false, map[*exec.Cmd]bool{}
	l.mu.Unlock()
	l.watch, l.unwatch = logWrites(l.t, l.dir, plRun)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				for _, op := range l.turn(w, false) {
					l.run(op, 0)
				}
				l.mu.Lock()
				stopped := l.stopped
				l.mu.Unlock()
				if stopped {
					return
				}
			}
		}()
	}
	l.wait = wg.Wait
}

// cut cuts the power at a random moment up to about half a second into
// the window, in one cut in three just after a write to r1's log (between
// a commit's write and its fsync, or between the fsync and the
// projections). Either LazyFS is killed at once, whatever it is doing (a
// fsync in progress may be cut short), or every crew process is frozen
// (SIGSTOP), LazyFS drops what was not fsynced (lazyfs::clear-cache) and
// is killed. Then the crew processes are killed and the file system
// unmounted.
func (l *plLane) cut(cut int) {
	t := l.t
	time.Sleep(time.Duration(l.randN(500)) * time.Millisecond)
	if cut%3 == 1 && logWritten(l.watch, 300*time.Millisecond) {
		l.stats.afterLogWrite++
	}
	frozen := l.randN(2) == 0
	l.mu.Lock()
	l.stopped = true
	l.stats.inFlight += len(l.procs)
	if frozen {
		for cmd := range l.procs {
			cmd.Process.Signal(syscall.SIGSTOP)
		}
	}
	l.mu.Unlock()
	var err error
	switch {
	case !l.fs.alive():
		err = fmt.Errorf("LazyFS ended on its own before the cut\n%s", l.fs.logTail())
	case frozen:
		// How full the cache is at the cut: a full one writes through to
		// the disk, and unsynced writes would survive.
		var usage int
		if usage, err = l.fs.usage(); err == nil {
			l.stats.cacheUsage = max(l.stats.cacheUsage, usage)
			if usage > 50 {
				err = fmt.Errorf("LazyFS's cache is %d%% full: a full one writes through to the disk; make lazyfsCacheMB larger", usage)
			}
		}
		if err == nil {
			err = l.fs.clearCache()
		}
		l.stats.frozenCuts++
	}
	l.fs.kill()
	l.mu.Lock()
	for cmd := range l.procs {
		cmd.Process.Signal(syscall.SIGKILL)
	}
	l.mu.Unlock()
	l.wait()
	l.unwatch()
	if uerr := l.fs.unmount(); err == nil {
		err = uerr
	}
	if err != nil {
		t.Fatalf("cut %d: %v", cut, err)
	}
	l.stats.cuts++
	l.failures(fmt.Sprintf("cut %d, before the cut", cut))
}

// verify checks what cut left (see the top of the file): first the files
// as the cut left them, then the readers and a writer of every kind, in
// one order or the other, then the projections.
func (l *plLane) verify(cut int) {
	t := l.t
	l.mu.Lock()
	l.stopped, l.procs = false, map[*exec.Cmd]bool{}
	l.mu.Unlock()
	l.survey()
	evs, torn := readLog(t, l.dir, plRun)
	if torn > 0 {
		l.stats.tornLog++
	}
	l.checkSurvived(fmt.Sprintf("cut %d, as the cut left the files", cut), evs)
	if cut%2 == 0 {
		l.stats.readersFirst++
		if l.readers(cut) {
			l.stats.damagedFirst++
		}
		l.nextWriters(cut)
	} else {
		l.nextWriters(cut)
		if l.readers(cut) {
			l.stats.damagedAfterWriters++
		}
	}
	evs, _ = readLog(t, l.dir, plRun)
	l.checkSurvived(fmt.Sprintf("cut %d, after the next writers", cut), evs)
	// tasks.json may be behind, whole and true to the log up to its seq,
	// when LazyFS failed the last writer's ftruncate of its spare (see the
	// top of the file); then one of the next few writers must catch it up.
	when := fmt.Sprintf("cut %d, after the next writers", cut)
	for try := 1; l.checkProjections(when, evs, try < plLateWriters); try++ {
		l.stats.lateSnapshots++
		if len(l.said) > 0 {
			t.Logf("%s: tasks.json is late; the writers said: %s", when, strings.Join(l.said, "\n"))
		}
		l.run(l.turn(0, true)[1], stuckAfter)
		when = fmt.Sprintf("cut %d, after %d more writers, tasks.json being late", cut, try)
		l.failures(when)
		evs, _ = readLog(t, l.dir, plRun)
		l.checkSurvived(when, evs)
	}
}

// plReaders are the readers run after every cut; inbox (which records
// message.delivered, so it writes too) comes last.
var plReaders = [][]string{
	{"events", "--json", "--run", plRun},
	{"pending", "--json", "--run", plRun},
	{"task", "list", "--json", "--run", plRun},
	{"mail", "check", "--json", "--archived"},
	{"run", "report", plRun, "--format", "json"},
	{"inbox", "--task", "t2", "--json", "--run", plRun},
}

// readers runs every reader. Each must exit 0, or 7 naming the damage;
// after any 7, crew repair r1 must exit 0, and then those readers 0. It
// reports whether any exited 7.
func (l *plLane) readers(cut int) (damage bool) {
	t := l.t
	damaged := l.runReaders(cut, plReaders)
	if len(damaged) == 0 {
		return false
	}
	var again [][]string
	for _, args := range plReaders {
		name := strings.Join(args, " ")
		stderr, ok := damaged[name]
		if !ok {
			continue
		}
		again = append(again, args)
		l.stats.damagedReaders[name]++
		if !strings.Contains(stderr, "damaged") {
			t.Fatalf("cut %d: crew %s exited 7 without naming the damage:\n%s", cut, name, stderr)
		}
	}
	res := l.crew(stuckAfter, "repair", plRun, "--json")
	for try := 1; try < plLateWriters && res.code == 1 && lazyTruncate(res.stderr); try++ {
		l.stats.lazyTruncates++
		res = l.crew(stuckAfter, "repair", plRun, "--json")
	}
	if res.code != 0 {
		var names []string
		for name, stderr := range damaged {
			names = append(names, fmt.Sprintf("crew %s: %s", name, firstLines(stderr, 3)))
		}
		t.Fatalf("cut %d: after readers exited 7 (%s), crew repair %s: exit %d (timed out: %v)\nstderr: %s",
			cut, strings.Join(names, "; "), plRun, res.code, res.timedOut, res.stderr)
	}
	l.stats.repairs++
	if still := l.runReaders(cut, again); len(still) > 0 {
		for name, stderr := range still {
			t.Errorf("cut %d: after crew repair %s, crew %s still exits 7:\n%s", cut, plRun, name, firstLines(stderr, 5))
		}
		t.FailNow()
	}
	return true
}

// runReaders runs the readers, side by side but for crew inbox (which
// records message.delivered) after the others, and returns those that
// exited 7 with their stderr; any other exit code but 0 fails the test,
// and so does output that is not whole JSON records.
func (l *plLane) runReaders(cut int, readers [][]string) map[string]string {
	t := l.t
	results := make([]plResult, len(readers))
	var wg sync.WaitGroup
	for i, args := range readers {
		if args[0] == "inbox" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = l.crew(stuckAfter, args...)
		}()
	}
	wg.Wait()
	for i, args := range readers {
		if args[0] == "inbox" {
			results[i] = l.crew(stuckAfter, args...)
		}
	}
	damaged := map[string]string{}
	for i, res := range results {
		name := strings.Join(readers[i], " ")
		switch {
		case res.timedOut:
			t.Fatalf("cut %d: crew %s is stuck: still running after %s", cut, name, stuckAfter)
		case res.code == 7:
			damaged[name] = res.stderr
		case res.code != 0:
			t.Fatalf("cut %d: crew %s: exit %d\nstderr: %s", cut, name, res.code, res.stderr)
		}
		if readers[i][0] == "run" && readers[i][1] == "report" {
			if res.code == 0 && !json.Valid([]byte(res.stdout)) {
				t.Fatalf("cut %d: crew %s printed what is not JSON: %q", cut, name, firstLines(res.stdout, 3))
			}
		} else if bad := badJSONObjects(res.stdout); bad != "" {
			t.Fatalf("cut %d: crew %s printed a line that is not a whole JSON record: %q", cut, name, bad)
		}
	}
	return damaged
}

// firstLines returns the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "\n")
}

// nextWriters runs, at once and with a deadline, a writer of each lock a
// cut may leave behind (steer: the run lock and tasks.json's spare file;
// mail send: the mail tree; run create: the runs lock and a half-made run
// directory) and, in turn, the other kinds (task add, start and complete;
// ask; respond; inbox and ack; report, outbox and ack): none may be stuck,
// and each must exit 0 or with a code it may have.
func (l *plLane) nextWriters(cut int) {
	l.said = nil
	w0, w1, w2, w3 := l.turn(0, true), l.turn(1, true), l.turn(2, true), l.turn(3, true)
	ops := []*plOp{w0[1], w0[2], w2[1]}
	switch cut % 5 {
	case 0:
		ops = append(ops, w2[0])
	case 1:
		ops = append(ops, w1[0])
	case 2:
		ops = append(ops, w1[1])
	case 3:
		ops = append(ops, w3[0])
	default:
		ops = append(ops, w3[1], w3[2])
	}
	var wg sync.WaitGroup
	for _, op := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.run(op, stuckAfter)
		}()
	}
	wg.Wait()
	l.failures(fmt.Sprintf("cut %d, the writers after the cut", cut))
}

// survey counts what the cut left without its data, before any crew
// process runs: mail-tree files that are not JSON (copies of run
// messages: they are not fsynced) and empty projections of r1. A file of
// mail sent with crew mail send (fsynced before it exited 0) must be
// whole.
func (l *plLane) survey() {
	t := l.t
	mail := filepath.Join(l.dir, ".crew", "state", "mail")
	agents, err := os.ReadDir(mail)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range agents {
		files, err := os.ReadDir(filepath.Join(mail, a.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasPrefix(f.Name(), ".") || f.IsDir() {
				continue
			}
			data, err := os.ReadFile(filepath.Join(mail, a.Name(), f.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if json.Valid(data) {
				continue
			}
			l.stats.emptyCopies++
			for id := range l.mails {
				if strings.HasSuffix(f.Name(), "-"+id+".json") {
					t.Fatalf("mail %s/%s, sent with crew mail send which exited 0, lost its data in the cut: %q", a.Name(), f.Name(), data)
				}
			}
		}
	}
	rd := runDir(l.dir, plRun)
	for _, name := range []string{"tasks.json", "open.jsonl", "projected.json", "mailbox/inbox.jsonl", "mailbox/outbox.jsonl", "mailbox/steering.jsonl"} {
		if fi, err := os.Stat(filepath.Join(rd, name)); err == nil && fi.Size() == 0 {
			l.stats.emptyProjections++
		}
	}
}

// checkSurvived fails unless everything that exited 0 so far is in the
// log exactly once (evs, which must be dense): messages, tasks created and
// completed, acknowledgements; each mail sent is in its recipient's
// directory once; each run created has a log that starts with its
// run.created.
func (l *plLane) checkSurvived(when string, evs []logEvent) {
	t := l.t
	checkDense(t, when+": r1's log", evs)
	byBody := map[string]*logEvent{}
	created, completed, acked := map[string]int{}, map[string]int{}, map[string]int{}
	for i := range evs {
		e := &evs[i]
		if m := e.msg; m != nil {
			if prev := byBody[m.Body]; prev != nil {
				t.Fatalf("%s: message %q is in the log twice: seq %d and %d", when, m.Body, prev.Seq, e.Seq)
			}
			byBody[m.Body] = e
		}
		switch e.Type {
		case "task.created":
			created[e.Task]++
		case "task.completed":
			completed[e.Task]++
		case "message.acknowledged":
			who := e.Task
			if who == "" {
				who = "leader"
			}
			for _, id := range e.MessageIDs {
				acked[who+"/"+id]++
			}
		}
	}
	kinds := map[string]string{"steer": "steer", "report": "report", "ask": "question", "respond": "response"}
	for _, rec := range l.msgs {
		op, body, _ := strings.Cut(rec, " ")
		kind, task, _ := strings.Cut(op, ":")
		e := byBody[body]
		switch {
		case e == nil:
			t.Fatalf("%s: %s %q exited 0 but is not in the log", when, kind, body)
		case e.msg.Kind != kinds[kind] || e.msg.Task != task:
			t.Fatalf("%s: %s %q (task %s) is in the log as a %s for task %s (seq %d)", when, kind, body, task, e.msg.Kind, e.msg.Task, e.Seq)
		}
	}
	for id := range l.added {
		if created[id] != 1 {
			t.Fatalf("%s: task add %s exited 0; task.created is in the log %d times", when, id, created[id])
		}
	}
	for id := range l.completed {
		if completed[id] != 1 {
			t.Fatalf("%s: task complete %s exited 0; task.completed is in the log %d times", when, id, completed[id])
		}
	}
	for id, who := range l.acked {
		if acked[who+"/"+id] != 1 {
			t.Fatalf("%s: ack of %s by %s exited 0; it is acknowledged %d times in the log", when, id, who, acked[who+"/"+id])
		}
	}
	if len(l.mails) > 0 {
		files, err := os.ReadDir(mailDir(l.dir, "t2"))
		if err != nil {
			t.Fatal(err)
		}
		for id, to := range l.mails {
			n := 0
			for _, f := range files {
				if strings.HasSuffix(f.Name(), "-"+id+".json") {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%s: mail send %s to %s exited 0; its file is in %s's directory %d times", when, id, to, to, n)
			}
		}
	}
	for id := range l.runs {
		revs, _ := readLog(t, l.dir, id)
		if len(revs) == 0 || revs[0].Type != "run.created" {
			t.Fatalf("%s: run create %s exited 0; its log does not start with run.created: %+v", when, id, revs)
		}
		for _, e := range revs[1:] {
			if e.Type == "run.created" {
				t.Fatalf("%s: run %s: run.created twice (seq %d)", when, id, e.Seq)
			}
		}
	}
	l.stats.checked += len(l.msgs) + len(l.added) + len(l.completed) + len(l.acked) + len(l.mails) + len(l.runs)
}

// checkProjections fails unless r1's projections agree with its log
// (evs): each mailbox file holds exactly its messages, in seq order; each
// message is in its recipient's mail tree once, whole, with the read flag
// the log gives it; tasks.json reflects the whole log, or is behind it by
// fewer events than make it due, true to it up to its seq, with the
// projection mark at the log's end (docs/files.md, Snapshots). The mail tree may
// hold mail sent with crew mail send besides (no "run"), but nothing
// else: no file that is not whole JSON.
//
// With late, a tasks.json that is whole but behind the log, true to it up
// to its seq, is not a failure: checkProjections reports it (late
// snapshot) instead.
func (l *plLane) checkProjections(when string, evs []logEvent, late bool) (behind bool) {
	t := l.t
	rd := runDir(l.dir, plRun)
	want := map[string][]json.RawMessage{}
	for _, e := range evs {
		if e.msg != nil {
			want[e.msg.mailboxFile()] = append(want[e.msg.mailboxFile()], e.Message)
		}
	}
	for _, file := range []string{"inbox.jsonl", "outbox.jsonl", "steering.jsonl"} {
		data, err := os.ReadFile(filepath.Join(rd, "mailbox", file))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		lines, torn := splitLines(data)
		if torn > 0 || len(lines) != len(want[file]) {
			t.Fatalf("%s: mailbox/%s has %d lines (and a torn one of %d bytes); the log has %d messages for it", when, file, len(lines), torn, len(want[file]))
		}
		for i, line := range lines {
			var got, exp any
			if err := json.Unmarshal(line, &got); err != nil {
				t.Fatalf("%s: mailbox/%s line %d: %v: %q", when, file, i+1, err, line)
			}
			json.Unmarshal(want[file][i], &exp)
			if !reflect.DeepEqual(got, exp) {
				t.Fatalf("%s: mailbox/%s line %d differs from the log:\n got %s\nwant %s", when, file, i+1, line, want[file][i])
			}
		}
	}

	seen := map[string]bool{}
	for _, e := range evs {
		seen = markSeen(seen, e)
	}
	type copyWant struct {
		agent, body string
		read        bool
	}
	copies := map[string]copyWant{}
	for _, e := range evs {
		if m := e.msg; m != nil {
			agent := m.To
			if m.Direction == "outbox" {
				agent = "leader"
			}
			copies[m.ID] = copyWant{agent, m.Body, seen[agent+"/"+m.ID]}
		}
	}
	found := map[string]int{}
	mailRoot := filepath.Join(l.dir, ".crew", "state", "mail")
	agents, err := os.ReadDir(mailRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range agents {
		for _, sub := range []string{"", "archive"} {
			files, err := os.ReadDir(filepath.Join(mailRoot, a.Name(), sub))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				name := filepath.Join(a.Name(), sub, f.Name())
				if strings.HasPrefix(f.Name(), ".") || f.IsDir() {
					continue
				}
				data, err := os.ReadFile(filepath.Join(mailRoot, name))
				if err != nil {
					t.Fatal(err)
				}
				var m struct {
					ID, Body, Run string
					Read          bool
				}
				if err := json.Unmarshal(data, &m); err != nil {
					t.Fatalf("%s: mail %s is not whole: %v: %q", when, name, err, data)
				}
				if m.Run == "" {
					continue // sent with crew mail send (checkSurvived)
				}
				w, ok := copies[m.ID]
				switch {
				case m.Run != plRun || !ok:
					t.Fatalf("%s: mail %s belongs to no message of %s's log", when, name, plRun)
				case w.agent != a.Name() || w.body != m.Body:
					t.Fatalf("%s: mail %s: message %s (%q) belongs to %s", when, name, m.ID, m.Body, w.agent)
				case w.read != m.Read:
					t.Fatalf("%s: mail %s: read is %v, the log says %v", when, name, m.Read, w.read)
				}
				found[m.ID]++
			}
		}
	}
	for id, w := range copies {
		if found[id] != 1 {
			t.Fatalf("%s: message %s (%q) is in %s's mail tree %d times, want once", when, id, w.body, w.agent, found[id])
		}
	}

	var snap struct {
		Seq    int64 `json:"seq"`
		Offset int64 `json:"offset"`
		Tasks  map[string]struct {
			Status string `json:"status"`
		} `json:"tasks"`
	}
	data, err := os.ReadFile(filepath.Join(rd, "tasks.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &snap); err != nil {
		if late {
			// Not written since the cut emptied it; crew rebuilds an
			// unusable snapshot from the log.
			return true
		}
		t.Fatalf("%s: tasks.json: %v: %q\nwhat the last writers said: %s", when, err, data, strings.Join(l.said, "\n"))
	}
	fi, err := os.Stat(filepath.Join(rd, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// Behind by fewer events than make it due, with the projection mark
	// at the log's end, is how a run of many tasks is left.
	last := evs[len(evs)-1].Seq
	m := readMark(t, rd)
	marked := snap.Seq < last && withinDue(last-snap.Seq, tasksIn(evs)) && m.Seq == last && m.Offset == fi.Size()
	if marked {
		l.stats.markedCuts++
	}
	if (late || marked) && snap.Seq < last && snap.Seq > 0 && snap.Offset < fi.Size() {
		// Whole (it decoded) and behind: it must be true to the log up to
		// its seq, ending where the event of that seq ends.
		log, err := os.ReadFile(filepath.Join(rd, "events.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		lines, _ := splitLines(log[:snap.Offset])
		if log[snap.Offset-1] != '\n' || len(lines) != int(snap.Seq) {
			t.Fatalf("%s: tasks.json reflects seq %d, offset %d, which is not where that event ends in the log", when, snap.Seq, snap.Offset)
		}
		evs, behind = evs[:snap.Seq], !marked
	}
	if last := evs[len(evs)-1].Seq; !behind && !marked && (snap.Seq != last || snap.Offset != fi.Size()) {
		var tail []string
		for _, e := range evs[max(0, len(evs)-4):] {
			tail = append(tail, fmt.Sprintf("seq %d %s task %q", e.Seq, e.Type, e.Task))
		}
		t.Fatalf("%s: tasks.json reflects seq %d, offset %d; the log ends at seq %d, offset %d (%s)\nwhat the last writers said: %s",
			when, snap.Seq, snap.Offset, last, fi.Size(), strings.Join(tail, "; "), strings.Join(l.said, "\n"))
	}
	status := map[string]string{}
	for _, e := range evs {
		if e.Task != "" && e.To != "" && strings.HasPrefix(e.Type, "task.") {
			status[e.Task] = e.To
		}
	}
	for id, s := range status {
		if snap.Tasks[id].Status != s {
			t.Fatalf("%s: tasks.json: task %s is %q, the log says %q", when, id, snap.Tasks[id].Status, s)
		}
	}
	if len(snap.Tasks) != len(status) {
		t.Fatalf("%s: tasks.json has %d tasks, the log %d", when, len(snap.Tasks), len(status))
	}
	return behind
}

// checkRebuild copies the lane's state root off LazyFS, deletes r1's
// projections in the copy (tasks.json, the mailbox files, r1's copies in
// the mail tree), rebuilds them with crew repair r1, and fails unless
// they equal the originals byte for byte: after all the cuts, the
// projections are exactly what the log alone gives. A tasks.json behind
// the log is compared with one rebuilt as far as its seq (compareRebuild).
func (l *plLane) checkRebuild() {
	t := l.t
	cp := t.TempDir()
	if err := os.CopyFS(cp, os.DirFS(l.dir)); err != nil {
		t.Fatal(err)
	}
	orig := plProjections(t.T, cp)
	rd := runDir(cp, plRun)
	for _, p := range []string{filepath.Join(rd, "tasks.json"), filepath.Join(rd, "mailbox")} {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
	for name := range orig {
		if strings.HasPrefix(name, "mail/") {
			if err := os.Remove(filepath.Join(cp, ".crew", "state", name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	crew(t, cp, "repair", plRun)
	compareRebuild(t, l.dir, plRun, "rebuild: ", orig, plProjections(t.T, cp))
	if t.Failed() {
		t.FailNow()
	}
}

// plProjections returns r1's projections under dir's state root, by path
// relative to the state directory: tasks.json, the mailbox files, and the
// mail-tree files of r1's messages.
func plProjections(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for name, data := range projectionFiles(t, dir, plRun) {
		if strings.HasPrefix(name, "mail/") {
			var m struct{ Run string }
			if json.Unmarshal(data, &m) != nil || m.Run != plRun {
				continue
			}
		}
		out[name] = data
	}
	return out
}
