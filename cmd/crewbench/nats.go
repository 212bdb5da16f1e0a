package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/natstest"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	natsstore "github.com/crew-dev/crew/store/nats"
	"github.com/crew-dev/crew/task"
)

// natsResult is what measureNATS finds, on an embedded nats-server
// (JetStream, sync_interval: always, the setting the README asks of a
// single node) started under the bench's directory.
type natsResult struct {
	RawPublishPerS float64 // raw: an acknowledged js.Publish of 300 bytes, one writer
	SendPerS       float64 // crew: library steers through run.Run on the JetStream store, one writer
	SendRatio      float64 // median of SendPerS ÷ RawPublishPerS of neighbouring rounds: nats_send_ratio
	raw            []float64
	wake           wakeResult // Respond returns → a blocked crew ask --wait (CREW_STORE) prints: nats_wake_p50_ms
}

// benchNATS measures the JetStream store and adds its keys to res and
// its lines to rows.
func benchNATS(tmp string, c config, res *result, rows []row) ([]row, error) {
	step("NATS JetStream: raw publish and crew sends, %d rounds of %s each; %d wake-ups", c.rounds, c.round, c.wake)
	n, err := measureNATS(tmp, c)
	if err != nil {
		return rows, fmt.Errorf("nats: %w", err)
	}
	res.NATSRawPublishPerS, res.NATSSendPerS, res.NATSSendRatio = n.RawPublishPerS, n.SendPerS, n.SendRatio
	res.NATSWakeP50ms, res.NATSWakeP99ms, res.NATSWakeCallP50ms = n.wake.p50, n.wake.p99, n.wake.callP50
	return append(rows,
		row{"nats_send_ratio", "library steers on the JetStream store, one writer, ÷ raw JetStream publish", f2(n.SendRatio), "(context)",
			fmt.Sprintf("%.0f ops/s against %.0f publishes/s (%s); each steer is one conditional publish and its mail copy", n.SendPerS, n.RawPublishPerS, spread(n.raw))},
		row{"nats_wake_p50_ms", "Respond returns → blocked `crew ask --wait` on the JetStream store prints (median)", f2(n.wake.p50), "(context)",
			fmt.Sprintf("%d samples; p99 %.2f ms; %d printed before Respond returned (counted as 0: the waiter reads the stored event while Respond delivers its mail copy); from Respond's call: %.2f ms", c.wake, n.wake.p99, n.wake.early, n.wake.callP50)},
	), nil
}

// measureNATS starts the server and measures, in c.rounds alternating
// rounds of c.round, the raw publish rate and crew's send rate on it,
// then c.wake wake-ups.
func measureNATS(tmp string, c config) (natsResult, error) {
	var res natsResult
	dir := filepath.Join(tmp, "nats")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return res, err
	}
	srv, err := natstest.Start(filepath.Join(dir, "server"))
	if err != nil {
		return res, err
	}
	defer srv.Shutdown()
	raw, err := rawPublish(srv.ClientURL())
	if err != nil {
		return res, err
	}
	s, err := natsstore.Dial(context.Background(), srv.ClientURL(), natsstore.Options{})
	if err != nil {
		return res, err
	}
	defer s.Close()
	root := run.NewRoot(s)
	send, err := natsSend(root)
	if err != nil {
		return res, err
	}
	var prod []float64
	if res.raw, prod, err = alternateWith(c, "raw publish", raw, "crew send", send); err != nil {
		return res, err
	}
	res.RawPublishPerS, res.SendPerS, res.SendRatio = median(res.raw), median(prod), medianRatio(prod, res.raw)

	r, err := startedRun(root, "wake", "w1")
	if err != nil {
		return res, err
	}
	res.wake, err = wakeSamples(c, r, append(os.Environ(), "CREW_STORE="+srv.ClientURL(), "CREW_RUN=wake", "CREW_TASK=w1"))
	return res, err
}

// alternateWith runs a short warm-up of a and b, then c.rounds rounds of
// a followed by b, each for c.round, and returns both series (the NATS
// counterpart of alternate, whose raw limit is the disk's).
func alternateWith(c config, aName string, a func(time.Duration) (float64, error), bName string, b func(time.Duration) (float64, error)) (as, bs []float64, err error) {
	for _, f := range []func(time.Duration) (float64, error){a, b} {
		if _, err := f(c.round / 4); err != nil {
			return nil, nil, err
		}
	}
	for i := range c.rounds {
		x, err := a(c.round)
		if err != nil {
			return nil, nil, err
		}
		y, err := b(c.round)
		if err != nil {
			return nil, nil, err
		}
		step("  round %d: %s %.0f/s, %s %.0f/s (%.2f)", i+1, aName, x, bName, y, y/x)
		as, bs = append(as, x), append(bs, y)
	}
	return as, bs, nil
}

// rawPublish returns the raw limit's driver: one writer publishing
// rawLine's 300 bytes to a file-backed stream of its own and waiting for
// each acknowledgement (the server has stored it; with sync always, on
// disk).
func rawPublish(url string) (func(time.Duration) (float64, error), error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "RAW", Subjects: []string{"raw"}, Storage: jetstream.FileStorage}); err != nil {
		return nil, err
	}
	return rate(func(int) error {
		_, err := js.Publish(context.Background(), "raw", rawLine)
		return err
	}), nil
}

// natsSend returns crew's driver: one goroutine steering a running task
// through a Run on root, each call returning once its event is stored and
// its mail copy delivered.
func natsSend(root *run.Root) (func(time.Duration) (float64, error), error) {
	r, err := startedRun(root, "send", "s1")
	if err != nil {
		return nil, err
	}
	return rate(func(i int) error {
		_, err := r.Send(context.Background(), run.SendOptions{Kind: events.KindSteer, Task: "s1", From: run.Leader, Body: body("steer", i, 120)})
		return err
	}), nil
}

// startedRun creates run id on root with one running task.
func startedRun(root *run.Root, id, taskID string) (*run.Run, error) {
	r, err := root.Create(run.CreateOptions{ID: id})
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	if _, err := r.AddTask(ctx, taskID, state.TaskSpec{Title: "bench task " + taskID}, run.Leader); err != nil {
		return nil, err
	}
	_, err = r.Transition(ctx, taskID, task.Start, taskID, "", nil)
	return r, err
}
