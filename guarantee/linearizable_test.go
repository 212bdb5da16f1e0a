package guarantee

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crew-dev/crew/internal/natstest"
	"github.com/crew-dev/crew/internal/teststores"
	natsstore "github.com/crew-dev/crew/store/nats"
)

// Linearizability (docs/guarantees.md, 7): concurrent operations on a run
// behave as if they happened one at a time, each at a moment between its
// call and its return, in the order of a sequential model of the run.
// Real crew processes (crew mcp servers, one tool call per operation) of
// the leader and of each task's worker call steer, respond, ask, inbox,
// ack and task show at random while a killer sends kill -9 to random ones;
// every call and return is recorded, and porcupine
// (github.com/anishathalye/porcupine) checks the history against linModel.
// An operation whose process was killed, or that failed with anything but
// a conflict, has an unknown outcome: it may or may not have happened.

// linInput is one operation: kind is steer, respond (leader), ask, inbox
// (worker: crew_inbox --unread), ack (worker: crew_ack of the message
// with that body, one a steer or respond returned) or show
// (crew_task_show); body makes each message unique.
type linInput struct {
	Kind, Task, Body string
}

// linOutput is what an operation returned: its message's seq (steer,
// respond, ask), the bodies it delivered (inbox, sorted, joined by "|"),
// the task's status (show), or the error class (conflict); Unknown when
// the outcome is not known.
type linOutput struct {
	Unknown bool
	Class   string
	Seq     int64
	Bodies  string
	Status  string
}

// linState is the model's state of one task (the history is partitioned
// by task): its status (running or waiting), the bodies of its messages
// not yet delivered (sorted, joined by "|"), and the highest seq an
// operation on it returned, which the next must exceed.
type linState struct {
	Status  string
	Pending string
	LastSeq int64
}

// removeBody returns set without body.
func removeBody(set, body string) string {
	parts := slices.DeleteFunc(strings.Split(set, "|"), func(b string) bool { return b == body || b == "" })
	return strings.Join(parts, "|")
}

func addBody(set, body string) string {
	if set == "" {
		return body
	}
	parts := append(strings.Split(set, "|"), body)
	slices.Sort(parts)
	return strings.Join(parts, "|")
}

// linStep is the sequential model of a task (docs/state-machine.md): ask
// moves running to waiting and is refused (conflict) while waiting;
// respond moves waiting to running, is refused while running, and leaves
// its response pending; steer leaves its steer pending; inbox delivers
// exactly the pending messages; ack of a message closes it, so that no
// inbox delivers it after (one delivered or closed before stays so); show
// returns the status. Each message's
// seq exceeds every seq returned before it. An unknown outcome may be
// either: the operation happened, or it did not.
func linStep(s linState, in linInput, out linOutput) []linState {
	if out.Unknown {
		states := []linState{s}
		switch {
		case in.Kind == "steer":
			states = append(states, linState{s.Status, addBody(s.Pending, in.Body), s.LastSeq})
		case in.Kind == "ask" && s.Status == "running":
			states = append(states, linState{"waiting", s.Pending, s.LastSeq})
		case in.Kind == "respond" && s.Status == "waiting":
			states = append(states, linState{"running", addBody(s.Pending, in.Body), s.LastSeq})
		case in.Kind == "inbox" && s.Pending != "":
			states = append(states, linState{s.Status, "", s.LastSeq})
		case in.Kind == "ack" && removeBody(s.Pending, in.Body) != s.Pending:
			states = append(states, linState{s.Status, removeBody(s.Pending, in.Body), s.LastSeq})
		}
		return states
	}
	if out.Class != "" {
		refused := out.Class == "conflict" && (in.Kind == "ask" && s.Status == "waiting" || in.Kind == "respond" && s.Status == "running")
		if refused {
			return []linState{s}
		}
		return nil
	}
	switch in.Kind {
	case "steer":
		if out.Seq > s.LastSeq {
			return []linState{{s.Status, addBody(s.Pending, in.Body), out.Seq}}
		}
	case "ask":
		if s.Status == "running" && out.Seq > s.LastSeq {
			return []linState{{"waiting", s.Pending, out.Seq}}
		}
	case "respond":
		if s.Status == "waiting" && out.Seq > s.LastSeq {
			return []linState{{"running", addBody(s.Pending, in.Body), out.Seq}}
		}
	case "inbox":
		if out.Bodies == s.Pending {
			return []linState{{s.Status, "", s.LastSeq}}
		}
	case "ack":
		return []linState{{s.Status, removeBody(s.Pending, in.Body), s.LastSeq}}
	case "show":
		if out.Status == s.Status {
			return []linState{s}
		}
	}
	return nil
}

// linModel is linStep for porcupine, partitioned by task.
var linModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byTask := map[string][]porcupine.Operation{}
		var tasks []string
		for _, op := range history {
			task := op.Input.(linInput).Task
			if byTask[task] == nil {
				tasks = append(tasks, task)
			}
			byTask[task] = append(byTask[task], op)
		}
		var parts [][]porcupine.Operation
		for _, task := range tasks {
			parts = append(parts, byTask[task])
		}
		return parts
	},
	Init: func() []any { return []any{linState{Status: "running"}} },
	Step: func(state, input, output any) []any {
		var next []any
		for _, s := range linStep(state.(linState), input.(linInput), output.(linOutput)) {
			next = append(next, s)
		}
		return next
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		switch {
		case out.Unknown:
			return fmt.Sprintf("%s(%s %s) -> ?", in.Kind, in.Task, in.Body)
		case out.Class != "":
			return fmt.Sprintf("%s(%s %s) -> %s", in.Kind, in.Task, in.Body, out.Class)
		}
		switch in.Kind {
		case "inbox":
			return fmt.Sprintf("inbox(%s) -> [%s]", in.Task, out.Bodies)
		case "show":
			return fmt.Sprintf("show(%s) -> %s", in.Task, out.Status)
		case "ack":
			return fmt.Sprintf("ack(%s %s) -> ok", in.Task, in.Body)
		}
		return fmt.Sprintf("%s(%s %s) -> seq %d", in.Kind, in.Task, in.Body, out.Seq)
	},
	DescribeState: func(state any) string {
		s := state.(linState)
		return fmt.Sprintf("%s, pending [%s], seq > %d", s.Status, s.Pending, s.LastSeq)
	},
}

// linRecorder collects the history of many clients.
type linRecorder struct {
	start   time.Time
	mu      sync.Mutex
	ops     []porcupine.Operation
	clients atomic.Int32
	counts  map[string]int // per outcome: ok, conflict, unknown, and error classes
	oks     map[string]int // operations that succeeded, per kind
}

func (r *linRecorder) now() int64 { return int64(time.Since(r.start)) }

func (r *linRecorder) add(client int, in linInput, call int64, out linOutput, ret int64) {
	if out.Unknown {
		ret = math.MaxInt64 // it may take effect at any moment after its call
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	switch {
	case out.Unknown:
		r.counts["unknown"]++
	case out.Class != "":
		r.counts[out.Class]++
	default:
		r.counts["ok"]++
		r.oks[in.Kind]++
	}
}

func (r *linRecorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ops)
}

// linClient is one crew mcp process and the session to it.
type linClient struct {
	id  int
	cmd *exec.Cmd
	cs  *mcp.ClientSession
}

// linHarness starts crew mcp processes in dir with env.
type linHarness struct {
	t   *testing.T
	ctx context.Context
	dir string
	env []string
	rec *linRecorder
	// agentEnv is more environment for the processes of each task's
	// worker (its own NATS credentials), after env.
	agentEnv map[string][]string

	mu   sync.Mutex
	ids  map[string]string   // message id by body, of the messages steer and respond returned
	sent map[string][]string // their bodies by task, in the order they returned
}

// sentTo returns the body of one of the last few messages a steer or
// respond to task returned (those most likely still pending), or "", and
// forgets it: each is acknowledged once (acknowledging a closed message
// again reads the log for its status, a cost this workload need not pay
// on every try).
func (h *linHarness) sentTo(r *rand.Rand, task string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	bodies := h.sent[task]
	if len(bodies) == 0 {
		return ""
	}
	i := len(bodies) - 1 - r.IntN(min(len(bodies), 3))
	body := bodies[i]
	h.sent[task] = slices.Delete(bodies, i, i+1)
	return body
}

func (h *linHarness) connect(extra ...string) (*linClient, error) {
	cmd := exec.Command(crewBin, "mcp")
	cmd.Dir, cmd.Env = h.dir, crewEnv(append(slices.Clone(h.env), extra...)...)
	client := mcp.NewClient(&mcp.Implementation{Name: "crew-linearizability", Version: "1"}, nil)
	cs, err := client.Connect(h.ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, err
	}
	return &linClient{id: int(h.rec.clients.Add(1)) - 1, cmd: cmd, cs: cs}, nil
}

// call carries out in on c and records it.
func (h *linHarness) call(c *linClient, in linInput) linOutput {
	var name string
	args := map[string]any{}
	switch in.Kind {
	case "steer", "respond":
		name, args["task"], args["body"] = "crew_"+in.Kind, in.Task, in.Body
	case "ask":
		name, args["question"] = "crew_ask", in.Body
	case "inbox":
		name, args["unread"] = "crew_inbox", true
	case "ack":
		h.mu.Lock()
		name, args["ids"] = "crew_ack", []string{h.ids[in.Body]}
		h.mu.Unlock()
	case "show":
		name, args["task"] = "crew_task_show", in.Task
	}
	call := h.rec.now()
	res, err := c.cs.CallTool(h.ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	ret := h.rec.now()
	out := linOutput{Unknown: true}
	switch {
	case err != nil:
	case res.IsError:
		class, _, _ := strings.Cut(errorText(res), " ")
		if class == "conflict" {
			out = linOutput{Class: class}
		} else {
			h.rec.mu.Lock()
			h.rec.counts["error "+class]++
			if h.rec.counts["error "+class] <= 3 { // the first few, to say what failed
				h.t.Logf("%s %v: %s (outcome unknown)", name, args, errorText(res))
			}
			h.rec.mu.Unlock()
		}
	default:
		out = linDecode(in, res.StructuredContent)
		if id, _ := res.StructuredContent.(map[string]any)["id"].(string); id != "" && (in.Kind == "steer" || in.Kind == "respond") {
			h.mu.Lock()
			h.ids[in.Body] = id
			h.sent[in.Task] = append(h.sent[in.Task], in.Body)
			h.mu.Unlock()
		}
	}
	h.rec.add(c.id, in, call, out, ret)
	return out
}

// linDecode reads an operation's output from a tool's structured output.
func linDecode(in linInput, content any) linOutput {
	m, _ := content.(map[string]any)
	switch in.Kind {
	case "inbox":
		var bodies []string
		msgs, _ := m["messages"].([]any)
		for _, x := range msgs {
			msg, _ := x.(map[string]any)
			if b, _ := msg["body"].(string); b != "" {
				bodies = append(bodies, b)
			}
		}
		slices.Sort(bodies)
		return linOutput{Bodies: strings.Join(bodies, "|")}
	case "show":
		s, _ := m["status"].(string)
		return linOutput{Status: s}
	}
	seq, _ := m["seq"].(float64)
	return linOutput{Seq: int64(seq)}
}

// errorText is the text of an error result: "<class> (exit N): message"
// (mcpserver).
func errorText(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	tc, _ := res.Content[0].(*mcp.TextContent)
	if tc == nil {
		return ""
	}
	return tc.Text
}

// linWorkload runs the clients until the history holds target operations:
// one worker process per task and leaders leader processes, each calling
// at random; killer sends kill -9 to a random client process every
// killEvery, which then starts again as a new client. chaos, if not nil,
// runs in the calling goroutine beside them until stop is closed (a NATS
// node killed and restarted).
func (h *linHarness) linWorkload(tasks []string, leaders, target int, killEvery time.Duration, chaos func(stop <-chan struct{})) (kills int) {
	var mu sync.Mutex
	live := map[int]*linClient{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var stopOnce sync.Once
	loop := func(seed uint64, extra []string, pick func(r *rand.Rand, n int) linInput) {
		defer wg.Done()
		r := rand.New(rand.NewPCG(seed, 1))
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			c, err := h.connect(extra...)
			if err != nil {
				h.t.Errorf("start crew mcp: %v", err)
				stopOnce.Do(func() { close(stop) })
				return
			}
			mu.Lock()
			live[c.id] = c
			mu.Unlock()
			for {
				select {
				case <-stop:
					c.cs.Close()
					return
				default:
				}
				out := h.call(c, pick(r, n))
				n++
				if h.rec.len() >= target {
					stopOnce.Do(func() { close(stop) })
				}
				if out.Unknown {
					break // killed (or failed): a new process takes over
				}
			}
			mu.Lock()
			delete(live, c.id)
			mu.Unlock()
			c.cs.Close()
		}
	}
	for i, task := range tasks {
		wg.Add(1)
		go loop(uint64(i), append([]string{"CREW_TASK=" + task}, h.agentEnv[task]...), func(r *rand.Rand, n int) linInput {
			kind := []string{"ask", "inbox", "inbox", "show", "ack"}[r.IntN(5)]
			if kind == "ack" {
				if body := h.sentTo(r, task); body != "" {
					return linInput{Kind: kind, Task: task, Body: body}
				}
				kind = "inbox"
			}
			return linInput{Kind: kind, Task: task, Body: fmt.Sprintf("%s-w-%d-%d", task, i, n)}
		})
	}
	for i := range leaders {
		wg.Add(1)
		go loop(uint64(100+i), nil, func(r *rand.Rand, n int) linInput {
			kind := []string{"steer", "respond", "respond", "show"}[r.IntN(4)]
			return linInput{Kind: kind, Task: tasks[r.IntN(len(tasks))], Body: fmt.Sprintf("l%d-%d", i, n)}
		})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := rand.New(rand.NewPCG(99, 2))
		for {
			select {
			case <-stop:
				return
			case <-time.After(killEvery/2 + time.Duration(r.Int64N(int64(killEvery)))):
			}
			mu.Lock()
			ids := make([]int, 0, len(live))
			for id := range live {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			var victim *linClient
			if len(ids) > 0 {
				victim = live[ids[r.IntN(len(ids))]]
			}
			mu.Unlock()
			if victim != nil && victim.cmd.Process != nil && victim.cmd.Process.Kill() == nil {
				kills++
			}
		}
	}()
	if chaos != nil {
		chaos(stop)
	}
	wg.Wait()
	<-done
	n, took := h.rec.len(), time.Since(h.rec.start)
	h.t.Logf("%d operations in %v: %.1f per second; succeeded: %v", n, took.Round(time.Millisecond), float64(n)/took.Seconds(), h.rec.oks)
	for _, kind := range []string{"steer", "respond", "ask", "inbox", "ack", "show"} {
		if h.rec.oks[kind] == 0 {
			h.t.Errorf("no %s succeeded: the history does not test it", kind)
		}
	}
	return kills
}

// checkLinearizable checks the recorded history with porcupine; on a
// violation it writes porcupine's HTML visualisation (the partitions that
// fail, and the longest linearizable prefix of each) to the test's
// artifact directory and fails.
func (h *linHarness) checkLinearizable(name string) {
	h.t.Helper()
	h.rec.mu.Lock()
	ops := slices.Clone(h.rec.ops)
	h.rec.mu.Unlock()
	checkSeqOrder(h.t, name, ops)
	model := linModel.ToModel()
	res, info := porcupine.CheckOperationsVerbose(model, ops, 120*time.Second)
	h.t.Logf("%s: %d operations checked (%v), linearizability: %s", name, len(ops), h.rec.counts, res)
	if res == porcupine.Ok {
		return
	}
	path := visualise(h.t, name, model, info)
	if res == porcupine.Unknown {
		h.t.Errorf("%s: porcupine could not decide within its time limit; history visualised in %s", name, path)
		return
	}
	h.t.Errorf("%s: the history is not linearizable; porcupine's visualisation: %s", name, path)
}

// visualise writes porcupine's HTML visualisation of a checked history to
// $CREW_ARTIFACTS/linearizability-<name>.html, or, without
// CREW_ARTIFACTS, to a temporary directory kept after the test, and
// returns its path.
func visualise(t *testing.T, name string, model porcupine.Model, info porcupine.LinearizationInfo) string {
	t.Helper()
	dir := os.Getenv("CREW_ARTIFACTS")
	if dir == "" {
		d, err := os.MkdirTemp("", "crew-porcupine-") // not t.TempDir: kept for a person to open
		if err != nil {
			t.Fatal(err)
		}
		dir = d
	}
	path := filepath.Join(dir, "linearizability-"+name+".html")
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		t.Errorf("write the visualisation: %v", err)
	}
	return path
}

// checkSeqOrder checks seq across tasks, which the partitioned model
// sees per task only: the messages that operations returned have distinct
// seqs, and one returned before another was called has the lower seq.
func checkSeqOrder(t *testing.T, name string, ops []porcupine.Operation) {
	t.Helper()
	var sent []porcupine.Operation
	seen := map[int64]bool{}
	for _, op := range ops {
		if seq := op.Output.(linOutput).Seq; seq > 0 {
			if seen[seq] {
				t.Errorf("%s: two operations returned seq %d", name, seq)
			}
			seen[seq] = true
			sent = append(sent, op)
		}
	}
	slices.SortFunc(sent, func(a, b porcupine.Operation) int {
		return int(a.Output.(linOutput).Seq - b.Output.(linOutput).Seq)
	})
	// Going down in seq: the earliest return of a higher seq must not
	// come before the call of a lower one.
	minReturn := int64(math.MaxInt64)
	for i := len(sent) - 1; i >= 0; i-- {
		if minReturn < sent[i].Call {
			t.Errorf("%s: seq %d was called after an operation with a higher seq had returned", name, sent[i].Output.(linOutput).Seq)
		}
		minReturn = min(minReturn, sent[i].Return)
	}
}

// linOps is the number of operations a store's history holds: def per
// make test, a tenth with -short, or CREW_LINEARIZABILITY_OPS (make
// linearizability).
func linOps(def int) int {
	if n, err := strconv.Atoi(os.Getenv("CREW_LINEARIZABILITY_OPS")); err == nil && n > 0 {
		return n
	}
	if testing.Short() {
		return def / 10
	}
	return def
}

// TestLinModelRejects: the model refuses what a store that is not
// linearizable would show, so a pass of the tests below means something:
// a message delivered twice, or after its ack, a question asked twice, a
// response to a task not waiting, a status read back stale, a seq going
// backwards.
func TestLinModelRejects(t *testing.T) {
	op := func(call, ret int64, in linInput, out linOutput) porcupine.Operation {
		return porcupine.Operation{Input: in, Output: out, Call: call, Return: ret}
	}
	steer := op(0, 1, linInput{"steer", "t1", "s1"}, linOutput{Seq: 5})
	model := linModel.ToModel()
	for what, history := range map[string][]porcupine.Operation{
		"delivered twice": {steer,
			op(2, 3, linInput{"inbox", "t1", ""}, linOutput{Bodies: "s1"}),
			op(4, 5, linInput{"inbox", "t1", ""}, linOutput{Bodies: "s1"})},
		"asked twice": {
			op(0, 1, linInput{"ask", "t1", "q1"}, linOutput{Seq: 5}),
			op(2, 3, linInput{"ask", "t1", "q2"}, linOutput{Seq: 6})},
		"response to a running task": {op(0, 1, linInput{"respond", "t1", "r1"}, linOutput{Seq: 5})},
		"stale status": {
			op(0, 1, linInput{"ask", "t1", "q1"}, linOutput{Seq: 5}),
			op(2, 3, linInput{"show", "t1", ""}, linOutput{Status: "running"})},
		"seq backwards": {steer, op(2, 3, linInput{"steer", "t1", "s2"}, linOutput{Seq: 4})},
		"not yet sent":  {op(0, 1, linInput{"inbox", "t1", ""}, linOutput{Bodies: "s1"}), op(2, 3, linInput{"steer", "t1", "s1"}, linOutput{Seq: 5})},
		"delivered after its ack": {steer,
			op(2, 3, linInput{"ack", "t1", "s1"}, linOutput{}),
			op(4, 5, linInput{"inbox", "t1", ""}, linOutput{Bodies: "s1"})},
		"ack refused": {steer, op(2, 3, linInput{"ack", "t1", "s1"}, linOutput{Class: "conflict"})},
	} {
		if porcupine.CheckOperations(model, history) {
			t.Errorf("%s: the model accepts it", what)
		}
	}
	// A violation is visualised: the artifact a failing test leaves.
	t.Setenv("CREW_ARTIFACTS", t.TempDir())
	res, info := porcupine.CheckOperationsVerbose(model, []porcupine.Operation{steer,
		op(2, 3, linInput{"inbox", "t1", ""}, linOutput{Bodies: "s1"}),
		op(4, 5, linInput{"inbox", "t1", ""}, linOutput{Bodies: "s1"})}, 0)
	if res != porcupine.Illegal {
		t.Errorf("delivered twice: %s, want Illegal", res)
	}
	if html, err := os.ReadFile(visualise(t, "self-test", model, info)); err != nil || !strings.Contains(string(html), "inbox(t1)") || !strings.Contains(string(html), "[s1]") {
		t.Errorf("the visualisation does not show the history: %v", err)
	}
	// And accepts what may happen: overlapping calls in either order, an
	// unknown outcome either way.
	for what, history := range map[string][]porcupine.Operation{
		"overlapping": {op(0, 10, linInput{"steer", "t1", "s1"}, linOutput{Seq: 5}), op(1, 2, linInput{"inbox", "t1", ""}, linOutput{Bodies: "s1"})},
		"unknown, happened": {op(0, math.MaxInt64, linInput{"ask", "t1", "q1"}, linOutput{Unknown: true}),
			op(1, 2, linInput{"show", "t1", ""}, linOutput{Status: "waiting"})},
		"unknown, not happened": {op(0, math.MaxInt64, linInput{"ask", "t1", "q1"}, linOutput{Unknown: true}),
			op(1, 2, linInput{"show", "t1", ""}, linOutput{Status: "running"})},
		"acked, then others delivered": {steer, op(2, 3, linInput{"steer", "t1", "s2"}, linOutput{Seq: 6}),
			op(4, 5, linInput{"ack", "t1", "s1"}, linOutput{}),
			op(6, 7, linInput{"inbox", "t1", ""}, linOutput{Bodies: "s2"})},
		"acked after delivery": {steer, op(2, 3, linInput{"inbox", "t1", ""}, linOutput{Bodies: "s1"}),
			op(4, 5, linInput{"ack", "t1", "s1"}, linOutput{}),
			op(6, 7, linInput{"inbox", "t1", ""}, linOutput{})},
		"unknown ack, happened": {steer, op(2, math.MaxInt64, linInput{"ack", "t1", "s1"}, linOutput{Unknown: true}),
			op(4, 5, linInput{"inbox", "t1", ""}, linOutput{})},
		"unknown ack, not happened": {steer, op(2, math.MaxInt64, linInput{"ack", "t1", "s1"}, linOutput{Unknown: true}),
			op(4, 5, linInput{"inbox", "t1", ""}, linOutput{Bodies: "s1"})},
	} {
		if !porcupine.CheckOperations(model, history) {
			t.Errorf("%s: the model refuses it", what)
		}
	}
}

// TestLinearizableFileStore: the history of 10,000 operations on a run of
// the file store, by 4 workers and 2 leaders in crew mcp processes of
// which random ones are killed with kill -9, is linearizable.
func TestLinearizableFileStore(t *testing.T) {
	t.Parallel() // beside the NATS one, which mostly waits on its cluster
	tasks := []string{"t1", "t2", "t3", "t4"}
	dir := newRun(t, "r1", tasks...)
	for _, task := range tasks {
		crew(t, dir, "task", "start", task, "--run", "r1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h := &linHarness{t: t, ctx: ctx, dir: dir, env: []string{"CREW_RUN=r1"},
		rec: &linRecorder{start: time.Now(), counts: map[string]int{}, oks: map[string]int{}}, ids: map[string]string{}, sent: map[string][]string{}}
	kills := h.linWorkload(tasks, 2, linOps(10000), time.Second, nil)
	t.Logf("file store: %d crew mcp processes killed with kill -9", kills)
	if kills == 0 {
		t.Error("no process was killed")
	}
	h.checkLinearizable("file")
	assertDenseLog(t, filepath.Join(runDir(dir, "r1"), "events.jsonl"))
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Error("the workload ran out of time")
	}
}

// TestLinearizableNATSCluster: the same workload, 10,000 operations per
// make test (each crew mcp process keeps one connection to the cluster
// and the run's state between its tool calls), on a run kept on a
// three-node JetStream cluster (embedded servers on loopback, three
// replicas of the run's stream and of the mail bucket), with random crew
// processes killed with kill -9 and, every few seconds, the node leading
// the run's stream killed and restarted: the history is linearizable.
func TestLinearizableNATSCluster(t *testing.T) {
	t.Parallel()
	c := natstest.NewPartitionableCluster(t, 3)
	tasks := []string{"t1", "t2", "t3", "t4"}
	dir := t.TempDir()
	env := []string{"CREW_STORE=" + c.URL(), "CREW_NATS_REPLICAS=3", "CREW_RUN=r1"}
	must := func(args ...string) {
		t.Helper()
		if res := runCrewIn(t, dir, nil, env, args...); res.Code != 0 {
			t.Fatalf("crew %s: exit %d: %s", strings.Join(args, " "), res.Code, res.Stderr)
		}
	}
	must("run", "create", "--id", "r1")
	for _, task := range tasks {
		must("task", "add", task)
		must("task", "start", task)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h := &linHarness{t: t, ctx: ctx, dir: dir, env: env,
		rec: &linRecorder{start: time.Now(), counts: map[string]int{}, oks: map[string]int{}}, ids: map[string]string{}, sent: map[string][]string{}}
	restarts, partitions := 0, 0
	kills := h.linWorkload(tasks, 2, linOps(10000), time.Second, func(stop <-chan struct{}) {
		for round := 0; ; round++ {
			select {
			case <-stop:
				return
			case <-time.After(4 * time.Second):
			}
			i := c.StreamLeader(natsstore.StreamName("r1"))
			if i < 0 {
				continue
			}
			if round%2 == 1 {
				// The stream leader cut off from the others for a
				// while: its clients stay connected to it.
				c.Cut(i)
				time.Sleep(3 * time.Second)
				c.Heal(i)
				partitions++
				continue
			}
			c.Kill(i)
			time.Sleep(500 * time.Millisecond)
			c.Restart(i)
			restarts++
		}
	})
	t.Logf("NATS cluster: %d crew mcp processes killed with kill -9; the stream leader killed and restarted %d times, cut off from the others %d times", kills, restarts, partitions)
	if !testing.Short() && (kills == 0 || restarts == 0 || partitions == 0) {
		t.Errorf("%d processes killed, %d stream leaders restarted, %d cut off; want some of each", kills, restarts, partitions)
	}
	h.checkLinearizable("nats")
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Error("the workload ran out of time")
	}
}

// TestLinearizableNATSAuth: the workload on a server started from crew
// nats auth's configuration, each worker's crew mcp processes connecting
// with its own credentials and the leaders' with the leader's, random
// ones killed with kill -9: the history is linearizable, and no
// operation of the workload is refused (each agent does only what its
// role may).
func TestLinearizableNATSAuth(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	srv, _, err := teststores.AuthServer(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	tasks := []string{"t1", "t2", "t3", "t4"}
	keys := filepath.Join(base, "auth")
	dir := t.TempDir()
	if res := runCrewIn(t, dir, nil, nil, append([]string{"nats", "auth", "--out", keys, "--leader", "leader"}, tasks...)...); res.Code != 0 {
		t.Fatalf("crew nats auth: exit %d: %s", res.Code, res.Stderr)
	}
	env := []string{"CREW_STORE=" + srv.ClientURL(), "CREW_RUN=r1", "CREW_NATS_CREDS=" + filepath.Join(keys, "leader.creds")}
	creds := func(task string) []string { return []string{"CREW_NATS_CREDS=" + filepath.Join(keys, task+".creds")} }
	must := func(extra []string, args ...string) {
		t.Helper()
		if res := runCrewIn(t, dir, nil, append(slices.Clone(env), extra...), args...); res.Code != 0 {
			t.Fatalf("crew %s: exit %d: %s", strings.Join(args, " "), res.Code, res.Stderr)
		}
	}
	must(nil, "run", "create", "--id", "r1")
	agentEnv := map[string][]string{}
	for _, task := range tasks {
		must(nil, "task", "add", task)
		must(append(creds(task), "CREW_TASK="+task), "task", "start")
		agentEnv[task] = creds(task)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h := &linHarness{t: t, ctx: ctx, dir: dir, env: env, agentEnv: agentEnv,
		rec: &linRecorder{start: time.Now(), counts: map[string]int{}, oks: map[string]int{}}, ids: map[string]string{}, sent: map[string][]string{}}
	kills := h.linWorkload(tasks, 2, linOps(2000), time.Second, nil)
	t.Logf("NATS with authorization: %d crew mcp processes killed with kill -9; outcomes %v", kills, h.rec.counts)
	if n := h.rec.counts["error denied"]; n > 0 {
		t.Errorf("%d operations refused by the server: an agent was denied what its role does", n)
	}
	h.checkLinearizable("nats-auth")
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Error("the workload ran out of time")
	}
}
