// Command crewbench measures crew's performance against the raw limit of
// the disk it runs on (README.md, Performance). `make bench` runs it.
//
// Everything is measured in one run, so the figures hold on a noisy
// machine: the raw limit (a 300-byte line appended and fsync(2)ed under a
// file lock, repeated) is measured in rounds that alternate with the
// product's rounds, and each product figure that is a ratio is the median
// of the ratios of neighbouring rounds. It prints a readable table and, as
// its last line, one JSON object with the keys of the Performance table in README.md.
//
// It writes only under a temporary directory (removed at the end unless
// -keep), and builds the crew binary there unless -crew names one.
//
//	go run ./cmd/crewbench            # the full bench (a few minutes)
//	go run ./cmd/crewbench -quick     # smaller runs, for a quick look
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"time"
)

// config holds the sizes and durations of one bench.
type config struct {
	crew     string        // crew binary; built into the temp dir when empty
	events   int           // events in the large run (open_ms, tail_read_ms)
	messages int           // messages in the inbox of peak_rss_mb
	rounds   int           // alternating raw/product rounds
	round    time.Duration // length of one round
	wake     int           // wake-up samples
	cliOps   time.Duration // how long crew steer processes are run
	reps     int           // repetitions of open_ms and tail_read_ms
	keep     bool
	dir      string
	only     map[string]bool // parts to run; all when empty
	herd     int             // waiting workers in the herd part
	herdNATS int             // the same on NATS; 0: herd
	idle     time.Duration   // how long idle_waiters_cpu is measured
}

// seenPeriod is the simulated agent's time between tool calls in
// seen_ms: a hook call every 50 ms (the loop).
const seenPeriod = 50 * time.Millisecond

// runs reports whether the part is to be run.
func (c config) runs(part string) bool { return len(c.only) == 0 || c.only[part] }

func main() {
	if len(os.Args) > 2 && os.Args[1] == peakRSSFlag {
		if err := peakRSS(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "crewbench:", err)
			os.Exit(1)
		}
		return
	}
	var c config
	quick := flag.Bool("quick", false, "small sizes (100,000 events, 10,000 messages, fewer rounds): a quick look, not the figures to publish")
	flag.StringVar(&c.crew, "crew", "", "crew binary to measure (default: build ./cmd/crew into the temporary directory)")
	flag.IntVar(&c.events, "events", 1_000_000, "events in the large run")
	flag.IntVar(&c.messages, "messages", 100_000, "unacknowledged messages read by crew inbox for peak_rss_mb")
	flag.IntVar(&c.rounds, "rounds", 5, "alternating raw/product rounds")
	flag.DurationVar(&c.round, "round", time.Second, "length of one round")
	flag.IntVar(&c.wake, "wake", 200, "wake-up samples")
	flag.DurationVar(&c.cliOps, "cli", 3*time.Second, "how long sequential crew steer processes run")
	flag.IntVar(&c.reps, "reps", 21, "repetitions of the open and tail-read processes")
	flag.BoolVar(&c.keep, "keep", false, "keep the temporary directory")
	flag.StringVar(&c.dir, "dir", "", "parent of the temporary directory (default: the system's)")
	only := flag.String("only", "", "run only these parts, comma-separated: send,group,cli,wake,wakeagent,large,rss,agents,http,ui,nats,herd,lists (for work on one figure)")
	flag.IntVar(&c.herd, "herd", 1000, "workers blocked in crew ask --wait in the herd part")
	flag.IntVar(&c.herdNATS, "herd-nats", 0, "the same on NATS (default: -herd)")
	flag.DurationVar(&c.idle, "idle", 10*time.Second, "how long the herd's idle waiters' CPU is measured")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the bench process (the library's side) to `FILE`")
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		for name, v := range map[string]*int{"events": &c.events, "messages": &c.messages, "rounds": &c.rounds, "wake": &c.wake, "reps": &c.reps} {
			if !set[name] {
				*v = map[string]int{"events": 100_000, "messages": 10_000, "rounds": 3, "wake": 50, "reps": 11}[name]
			}
		}
		if !set["cli"] {
			c.cliOps = time.Second
		}
		if !set["herd"] {
			c.herd, c.idle = 100, 3*time.Second
		}
	}
	c.only = map[string]bool{}
	for _, p := range strings.Split(*only, ",") {
		if p != "" {
			c.only[p] = true
		}
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "crewbench:", err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if err := bench(c); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "crewbench:", err)
		os.Exit(1)
	}
}

// result is the last line: the keys of the Performance table in README.md, then context.
type result struct {
	RawFsyncPerS float64 `json:"raw_fsync_per_s"`
	SendRatio    float64 `json:"send_ratio"`
	GroupRatio   float64 `json:"group_ratio"`
	CLIOpsPerS   float64 `json:"cli_ops_per_s"`
	WakeP50ms    float64 `json:"wake_p50_ms"`
	WakeP99ms    float64 `json:"wake_p99_ms"`
	TailReadMs   float64 `json:"tail_read_ms"`
	OpenMs       float64 `json:"open_ms"`
	PeakRSSMB    float64 `json:"peak_rss_mb"`

	SendPerS        float64 `json:"send_per_s"`
	SendSyncRatio   float64 `json:"send_sync_ratio"` // one writer, each call waiting for its projections
	SendSyncPerS    float64 `json:"send_sync_per_s"`
	WakeCallP50ms   float64 `json:"wake_call_p50_ms"` // from Respond's call instead of its return
	GroupPerS       float64 `json:"group_per_s"`
	RawCreatePerS   float64 `json:"raw_create_per_s"` // new 600-byte files per second, no fsync: the mail-tree copies' ceiling
	RawGroupPerS    float64 `json:"raw_group_per_s"`  // 16 goroutines, a group-committed line and a new file per message, nothing else
	GroupOfLimit    float64 `json:"group_of_limit"`   // group_per_s ÷ raw_group_per_s
	RawSendPerS     float64 `json:"raw_send_per_s"`   // one writer, a locked line fsynced, a new file and a mailbox line per message, nothing else
	RawSendRatio    float64 `json:"raw_send_ratio"`   // raw_send_per_s ÷ raw, alternating rounds
	SendOfLimit     float64 `json:"send_of_limit"`    // send_ratio ÷ raw_send_ratio
	SendSyncOfLimit float64 `json:"send_sync_of_limit"`
	VersionPerS     float64 `json:"version_per_s"`    // crew version processes per second: cli_ops_per_s's ceiling
	HelloPerS       float64 `json:"hello_per_s"`      // a static Go hello-world's processes per second: the least a process costs
	VersionOfHello  float64 `json:"version_of_hello"` // version_per_s ÷ hello_per_s, round by round
	CLIOfHello      float64 `json:"cli_of_hello"`     // cli_ops_per_s ÷ hello_per_s
	WakeEarly       int     `json:"wake_early"`       // samples where the answer was printed before Respond returned
	Events          int64   `json:"events"`           // events in the large run
	GenEventsPerS   float64 `json:"gen_events_per_s"`
	InboxMessages   int     `json:"inbox_messages"`
	InboxMs         float64 `json:"inbox_ms"`
	CPUs            int     `json:"cpus"`
	GoVersion       string  `json:"go"`

	// The JetStream store (nats.go).
	NATSSendRatio      float64 `json:"nats_send_ratio"`
	NATSWakeP50ms      float64 `json:"nats_wake_p50_ms"`
	NATSWakeP99ms      float64 `json:"nats_wake_p99_ms"`
	NATSWakeCallP50ms  float64 `json:"nats_wake_call_p50_ms"`
	NATSSendPerS       float64 `json:"nats_send_per_s"`
	NATSRawPublishPerS float64 `json:"nats_raw_publish_per_s"`

	// Agents (agents.go): crew hook claude and crew mcp.
	HookIdleP50ms float64 `json:"hook_idle_ms_p50"`
	HookIdleP99ms float64 `json:"hook_idle_ms_p99"`
	SeenP50ms     float64 `json:"seen_p50_ms"`
	SeenP99ms     float64 `json:"seen_p99_ms"`
	// wake_agent.go: crew hook claude wait.
	WakeAgentP50ms float64 `json:"wake_agent_ms_p50"`
	WakeAgentP99ms float64 `json:"wake_agent_ms_p99"`
	MCPSteerRatio  float64 `json:"mcp_steer_ratio"`
	MCPSteerPerS   float64 `json:"mcp_steer_per_s"`
	// MCPInprocRatio is steers through an MCP server in process ÷
	// library steers: a tool call costs at most 1.2× the operation when
	// it is 1/1.2 or more.
	MCPInprocRatio float64 `json:"mcp_inproc_ratio"`
	MCPInprocPerS  float64 `json:"mcp_inproc_per_s"`
	// MCPNoopPerS is calls of a tool that does nothing through the same
	// SDK and transports: the floor of a tool call. MCPInprocOfLimit is
	// MCPInprocPerS ÷ the rate a steer would reach if a tool call cost
	// only that floor on top of a library steer (1 / (1/lib + 1/noop)).
	MCPNoopPerS      float64 `json:"mcp_noop_per_s"`
	MCPInprocOfLimit float64 `json:"mcp_inproc_of_limit"`
	// http.go: crew serve's HTTP hooks and MCP over Streamable HTTP.
	HookHTTPIdleP50ms  float64 `json:"hook_http_ms_p50"`
	HookHTTPIdleP99ms  float64 `json:"hook_http_ms_p99"`
	HookHTTPSteerP50ms float64 `json:"hook_http_steer_ms_p50"`
	HookHTTPSteerP99ms float64 `json:"hook_http_steer_ms_p99"`
	MCPHTTPSteerRatio  float64 `json:"mcp_http_steer_ratio"`
	MCPHTTPSteerPerS   float64 `json:"mcp_http_steer_per_s"`
	// The SDK's floor over HTTP: calls of a tool doing nothing through
	// its Streamable HTTP transport (client and server in this process,
	// loopback). MCPHTTPSteerLimit is the mcp_http_steer_ratio a steer
	// would reach if crew serve added only that floor to a library steer
	// (1 / (1 + lib/noop)); MCPHTTPOfLimit is the ratio ÷ that limit.
	MCPHTTPNoopPerS   float64 `json:"mcp_http_noop_per_s"`
	MCPHTTPSteerLimit float64 `json:"mcp_http_steer_limit"`
	MCPHTTPOfLimit    float64 `json:"mcp_http_of_limit"`

	// The dashboard (ui.go): crew serve's pages. The figures measured in
	// Chromium are nil, and left out, when none is installed.
	UIUpdateP50ms *float64 `json:"ui_update_p50_ms,omitempty"`
	UIUpdateP99ms *float64 `json:"ui_update_p99_ms,omitempty"`
	UIReapMs      *float64 `json:"ui_reap_ms,omitempty"` // p99

	UIBoardMs     float64 `json:"ui_board_ms"`
	UIBoardEvents int64   `json:"ui_board_events"` // events in the run of ui_board_ms

	HerdFigures // many waiting workers, the list curves (herd.go)
}

// step prints progress on stderr.
func step(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "crewbench: "+format+"\n", a...)
}

// bench runs every measurement in order and prints the table. It is
// long on purpose: a list of steps, each a few lines, whose order matters
// (the references just before the rows they bound).
func bench(c config) error {
	start := time.Now()
	tmp, err := os.MkdirTemp(c.dir, "crewbench-")
	if err != nil {
		return err
	}
	if c.keep {
		step("keeping %s", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	if c.crew == "" {
		c.crew = filepath.Join(tmp, "crew")
		step("building crew (lite) and crew-full into %s", tmp)
		// As make build does: the lite build as crew, which hands crew mcp
		// and --store commands to crew-full beside it.
		for bin, tags := range map[string]string{c.crew: "urfave_cli_no_docs,crew_lite", c.crew + "-full": "urfave_cli_no_docs"} {
			build := exec.Command("go", "build", "-tags", tags, "-o", bin, "github.com/crew-dev/crew/cmd/crew")
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := build.CombinedOutput(); err != nil {
				return fmt.Errorf("go build (run crewbench inside the crew module, or give -crew): %v\n%s", err, out)
			}
		}
	} else if c.crew, err = filepath.Abs(c.crew); err != nil {
		return err
	}
	res := result{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	var rows []row
	var raw []float64

	if c.runs("send") {
		step("raw limit and one writer, %d rounds of %s each", c.rounds, c.round)
		r, send, err := alternate(tmp, c, "send", sendOne)
		if err != nil {
			return err
		}
		raw = append(raw, r...)
		res.SendPerS, res.SendRatio = median(send), medianRatio(send, r)
		step("raw limit and one writer waiting for its projections, %d rounds of %s each", c.rounds, c.round)
		r, sync, err := alternate(tmp, c, "sendsync", sendOneSync)
		if err != nil {
			return err
		}
		raw = append(raw, r...)
		res.SendSyncPerS, res.SendSyncRatio = median(sync), medianRatio(sync, r)
		step("raw limit and the least one writer does per message, %d rounds of %s each", c.rounds, c.round)
		r, least, err := alternate(tmp, c, "rawsend", rawSend)
		if err != nil {
			return err
		}
		raw = append(raw, r...)
		res.RawSendPerS, res.RawSendRatio = median(least), medianRatio(least, r)
		res.SendOfLimit, res.SendSyncOfLimit = res.SendRatio/res.RawSendRatio, res.SendSyncRatio/res.RawSendRatio
	}
	if c.runs("group") {
		// First, on a quiet disk: what the file system and processors
		// allow any program, for reference.
		// rawGroup first: rawCreate's many files slow the creation of
		// the next ones in the same block group.
		step("the least a program does for 16 writers, and file creation, %s each", c.round)
		if res.RawGroupPerS, err = rawGroup(tmp, c.round); err != nil {
			return err
		}
		if res.RawCreatePerS, err = rawCreate(tmp, c.round); err != nil {
			return err
		}
		step("raw limit and 16 writers, %d rounds of %s each", c.rounds, c.round)
		r, group, err := alternate(tmp, c, "group", sendGroup)
		if err != nil {
			return err
		}
		raw = append(raw, r...)
		res.GroupPerS, res.GroupRatio = median(group), medianRatio(group, r)
		res.GroupOfLimit = res.GroupPerS / res.RawGroupPerS
	}
	if len(raw) > 0 {
		res.RawFsyncPerS = median(raw)
		rows = append(rows,
			row{"raw_fsync_per_s", "300-byte append + fsync under a file lock, per second", f0(res.RawFsyncPerS), "(reference)", spread(raw)},
			row{"send_ratio", "library steer/ask/respond, one writer, ÷ raw", f2(res.SendRatio), "≥ 0.85", f0(res.SendPerS) + " ops/s; projections follow (SetAsync), the round ends when they are written"},
			row{"send_sync_ratio", "the same, each call waiting for its mailbox lines and mail copies (the default)", f2(res.SendSyncRatio), "≥ 0.7", f0(res.SendSyncPerS) + " ops/s"},
			row{"group_ratio", "library steers from 16 goroutines, ÷ raw", f2(res.GroupRatio), "(context)", f0(res.GroupPerS) + " ops/s"},
		)
		if res.RawSendRatio > 0 {
			rows = append(rows,
				row{"raw_send_ratio", "one writer doing only what a message must: a locked line fsynced, a new file, a mailbox line, ÷ raw", f2(res.RawSendRatio), "(reference)", f0(res.RawSendPerS) + " messages/s"},
				row{"send_of_limit", "send_ratio ÷ raw_send_ratio", f2(res.SendOfLimit), "(context)", fmt.Sprintf("send_sync_ratio ÷ raw_send_ratio: %.2f", res.SendSyncOfLimit)})
		}
		if res.RawCreatePerS > 0 {
			rows = append(rows,
				row{"raw_create_per_s", "new 600-byte files written per second, no fsync (the mail-tree copy a message gets)", f0(res.RawCreatePerS), "(reference)",
					fmt.Sprintf("%.1f × raw_fsync_per_s", res.RawCreatePerS/res.RawFsyncPerS)},
				row{"raw_group_ratio", "16 goroutines doing only what a message must: a group-committed line and a new file each, ÷ raw", f2(res.RawGroupPerS / res.RawFsyncPerS), "(reference)",
					f0(res.RawGroupPerS) + " messages/s: the simplest program that writes what a message needs"},
				row{"group_of_limit", "group_per_s ÷ raw_group_per_s: crew's messages per second against the simplest program's", f2(res.GroupOfLimit), "≥ 0.8", ""})
		}
	}

	if c.runs("cli") {
		step("sequential crew steer processes for %s", c.cliOps)
		if res.CLIOpsPerS, err = cliOps(tmp, c); err != nil {
			return err
		}
		hello, err := helloOps(filepath.Join(tmp, "hello"))
		if err != nil {
			return err
		}
		step("crew version against a hello-world process, %d rounds of %s each", c.rounds, c.round)
		hellos, versions, err := alternateWith(c, "hello", hello, "version", versionOps(c))
		if err != nil {
			return err
		}
		res.HelloPerS, res.VersionPerS = median(hellos), median(versions)
		res.VersionOfHello, res.CLIOfHello = medianRatio(versions, hellos), res.CLIOpsPerS/res.HelloPerS
		rows = append(rows,
			row{"cli_ops_per_s", "sequential `crew steer` processes per second", f0(res.CLIOpsPerS), "≥ 300", ""},
			row{"cli_of_hello", "cli_ops_per_s ÷ hello_per_s: a steer process against the least a process can do", f2(res.CLIOfHello), "≥ 0.7", ""},
			row{"version_of_hello", "sequential `crew version` processes ÷ hello-world processes, same rounds: starting crew, and nothing else", f2(res.VersionOfHello), "≥ 0.85", fmt.Sprintf("%.0f crew version/s, %.0f hello/s", res.VersionPerS, res.HelloPerS)})
	}

	if c.runs("wake") {
		step("%d wake-ups of a blocked crew ask --wait", c.wake)
		w, err := wake(tmp, c)
		if err != nil {
			return err
		}
		res.WakeP50ms, res.WakeP99ms, res.WakeEarly, res.WakeCallP50ms = w.p50, w.p99, w.early, w.callP50
		rows = append(rows,
			row{"wake_p50_ms", "Respond returns → blocked `crew ask --wait` prints (median)", f2(res.WakeP50ms), "≤ 5",
				fmt.Sprintf("%d samples; %d printed before Respond returned (counted as 0); from Respond's call: %.2f ms", c.wake, w.early, w.callP50)},
			row{"wake_p99_ms", "the same, 99th percentile", f2(res.WakeP99ms), "≤ 20", fmt.Sprintf("max %.2f ms", w.max)},
		)
	}

	if c.runs("wakeagent") {
		if rows, err = benchWakeAgent(tmp, c, &res, rows); err != nil {
			return err
		}
	}

	var big *large // the large run, for ui_board_ms
	if c.runs("large") {
		step("generating a run of %d events through the library", c.events)
		big, err = largeRun(tmp, c)
		if err != nil {
			return err
		}
		res.Events, res.GenEventsPerS = big.events, big.perS
		step("%d events in %.1f s (%.0f events/s)", big.events, big.took.Seconds(), big.perS)
		if res.OpenMs, err = median3(c.reps, func() (float64, error) {
			return timeProcess(c.crew, big.env, "task", "list")
		}); err != nil {
			return err
		}
		if res.TailReadMs, err = median3(c.reps, func() (float64, error) {
			return timeProcess(c.crew, big.env, "inbox", "--task", big.tailTask, "--since", fmt.Sprint(big.tailSince), "--json")
		}); err != nil {
			return err
		}
		rows = append(rows,
			row{"tail_read_ms", fmt.Sprintf("`crew inbox --since` printing a task's last 10 messages, %d-event run", big.events), f2(res.TailReadMs), "≤ 10", "whole process, median"},
			row{"open_ms", fmt.Sprintf("`crew task list`, %d-event run", big.events), f2(res.OpenMs), "≤ 30", "whole process, median"},
		)
	}

	if c.runs("rss") {
		step("peak memory of crew inbox --json over %d messages", c.messages)
		rss, err := inboxRSS(tmp, c)
		if err != nil {
			return err
		}
		res.PeakRSSMB, res.InboxMessages, res.InboxMs = rss.mb, rss.messages, rss.ms
		rows = append(rows, row{"peak_rss_mb", fmt.Sprintf("`crew inbox --json` over %d messages, peak RSS", rss.messages), f1(res.PeakRSSMB), "≤ 64", fmt.Sprintf("took %.1f s", rss.ms/1000)})
	}

	if c.runs("agents") {
		step("%d idle crew hook claude PostToolUse processes", c.wake)
		if res.HookIdleP50ms, res.HookIdleP99ms, err = hookIdle(tmp, c, c.wake); err != nil {
			return err
		}
		seen := max(c.wake/4, 10)
		step("%d steers seen by a hook loop of %s", seen, seenPeriod)
		if res.SeenP50ms, res.SeenP99ms, err = hookSeen(tmp, c, seen, seenPeriod); err != nil {
			return err
		}
		step("steers through one crew mcp session against the library, %d rounds of %s each", c.rounds, c.round)
		lib, viaMCP, stop, err := mcpSteer(tmp, c)
		if err != nil {
			return err
		}
		libS, mcpS, err := alternateWith(c, "library", lib, "mcp", viaMCP)
		stop()
		if err != nil {
			return err
		}
		res.MCPSteerPerS, res.MCPSteerRatio = median(mcpS), medianRatio(mcpS, libS)
		step("steers through an MCP server in this process, then calls of a tool that does nothing, against the library, %d rounds of %s each", c.rounds, c.round)
		lib, inproc, stop, err := mcpInProcess(tmp)
		if err != nil {
			return err
		}
		noop, stopNoop, err := mcpNoop()
		if err != nil {
			stop()
			return err
		}
		libS, inS, err := alternateWith(c, "library", lib, "mcp-inproc", inproc)
		var libN, noopS []float64
		if err == nil {
			libN, noopS, err = alternateWith(c, "library", lib, "mcp-noop", noop)
		}
		stop()
		stopNoop()
		if err != nil {
			return err
		}
		res.MCPInprocPerS, res.MCPInprocRatio = median(inS), medianRatio(inS, libS)
		res.MCPNoopPerS = median(noopS)
		// A steer costs 1/lib; a tool call that added only the SDK's
		// floor would cost 1/lib + 1/noop.
		res.MCPInprocOfLimit = res.MCPInprocPerS * (1/median(libN) + 1/res.MCPNoopPerS)
		rows = append(rows,
			row{"hook_idle_ms", "`crew hook claude PostToolUse` with nothing new, whole process: p50 / p99", f2(res.HookIdleP50ms) + " / " + f2(res.HookIdleP99ms), "≤ 3 / ≤ 10", fmt.Sprintf("%d samples", c.wake)},
			row{"seen_ms", fmt.Sprintf("steer sent → in the answer of the next `crew hook claude PostToolUse` of a loop calling it every %s: p50 / p99", seenPeriod), f2(res.SeenP50ms) + " / " + f2(res.SeenP99ms), fmt.Sprintf("≤ %d (one loop period)", seenPeriod.Milliseconds()), fmt.Sprintf("%d steers", seen)},
			row{"mcp_steer_ratio", "steers through one `crew mcp` session ÷ library steers (each waiting for its projections), same run", f2(res.MCPSteerRatio), "≥ 0.5", f0(res.MCPSteerPerS) + " steers/s over MCP"},
			row{"mcp_inproc_ratio", "steers through an MCP server in process (in-memory transport, the app layer) ÷ library steers, same run", f2(res.MCPInprocRatio), "≥ 0.83 (≤ 1.2× the cost)", f0(res.MCPInprocPerS) + " steers/s"},
			row{"mcp_inproc_of_limit", "the same ÷ what a steer would reach if a tool call cost only the SDK's floor (calls of a tool doing nothing) on top of a library steer", f2(res.MCPInprocOfLimit), "(reference)", f0(res.MCPNoopPerS) + " empty tool calls/s"},
		)
	}

	if c.runs("http") {
		if rows, err = benchHTTP(tmp, c, &res, rows); err != nil {
			return err
		}
	}

	if c.runs("ui") {
		if rows, err = benchUI(tmp, c, big, &res, rows); err != nil {
			return err
		}
	}

	if c.runs("nats") {
		if rows, err = benchNATS(tmp, c, &res, rows); err != nil {
			return err
		}
	}
	if c.runs("herd") {
		nNATS := c.herdNATS
		if nNATS == 0 {
			nNATS = c.herd
		}
		f, hrows, err := herd(tmp, c, c.herd, nNATS, c.idle)
		if err != nil {
			return err
		}
		res.HerdFigures, rows = f, append(rows, hrows...)
	}
	if c.runs("lists") {
		lrows, err := listCurves(tmp, c, &res.HerdFigures)
		if err != nil {
			return err
		}
		rows = append(rows, lrows...)
	}
	if res.InboxMessages == 100_000 {
		res.Inbox100kMs = res.InboxMs
	}

	printTable(os.Stdout, rows, res, time.Since(start))
	line, err := json.Marshal(res)
	if err != nil {
		return err
	}
	fmt.Println(string(line))
	return nil
}

// row is one line of the table.
type row struct{ key, what, value, goal, note string }

func printTable(w io.Writer, rows []row, res result, took time.Duration) {
	fmt.Fprintf(w, "crew bench: %s, %d CPUs, %s; large run %d events (generated at %.0f events/s); bench took %s\n\n",
		runtime.GOOS+"/"+runtime.GOARCH, res.CPUs, res.GoVersion, res.Events, res.GenEventsPerS, took.Round(time.Second))
	fmt.Fprintln(w, "| key | what | value | goal | note |")
	fmt.Fprintln(w, "| --- | --- | ---: | --- | --- |")
	for _, r := range rows {
		fmt.Fprintf(w, "| `%s` | %s | %s | %s | %s |\n", r.key, r.what, r.value, r.goal, r.note)
	}
	fmt.Fprintln(w)
}

func f0(v float64) string { return fmt.Sprintf("%.0f", v) }
func f1(v float64) string { return fmt.Sprintf("%.1f", v) }
func f2(v float64) string { return fmt.Sprintf("%.2f", v) }

func spread(xs []float64) string {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return fmt.Sprintf("min %.0f, max %.0f", s[0], s[len(s)-1])
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// medianRatio is the median of a[i]/b[i]: each product round against the
// raw round next to it.
func medianRatio(a, b []float64) float64 {
	var r []float64
	for i := range a {
		if i < len(b) && b[i] > 0 {
			r = append(r, a[i]/b[i])
		}
	}
	return median(r)
}

// percentile returns the p-th percentile (0..100) of xs, nearest rank.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}

// median3 runs fn n times and returns the median.
func median3(n int, fn func() (float64, error)) (float64, error) {
	var xs []float64
	for range n {
		v, err := fn()
		if err != nil {
			return 0, err
		}
		xs = append(xs, v)
	}
	return median(xs), nil
}
