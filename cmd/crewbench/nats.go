package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/natstest"
	"github.com/crew-dev/crew/store/natsstore"
)

// natsResult is what measureNATS finds: the JetStream store's durable
// sends per second (the commit rule: expected last seq and message id)
// against a raw JetStream publish to a stream on the same server in the
// same run, and the wake-up latency of a waiter (a subscription) after an
// append returns.
type natsResult struct {
	RawPublishPerS float64 // raw js.Publish, one writer, acknowledged
	SendPerS       float64 // natsstore.Append, one writer
	SendRatio      float64 // SendPerS / RawPublishPerS: nats_send_ratio
	WakeP50ms      float64 // nats_wake_p50_ms
	WakeP99ms      float64
}

// measureNATS starts an embedded nats-server (JetStream, sync always,
// store under dir) and measures n sends and samples wake-ups.
func measureNATS(dir string, n, samples int) (natsResult, error) {
	var res natsResult
	sdir, err := os.MkdirTemp(dir, "nats-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(sdir)
	srv, err := natstest.Start(sdir)
	if err != nil {
		return res, err
	}
	defer srv.Shutdown()
	ctx := context.Background()

	// Raw: the physical limit of this server and disk.
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		return res, err
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "RAW", Subjects: []string{"raw"}, Storage: jetstream.FileStorage}); err != nil {
		return res, err
	}
	body := make([]byte, 300)
	start := time.Now()
	for range n {
		if _, err := js.Publish(ctx, "raw", body); err != nil {
			return res, err
		}
	}
	res.RawPublishPerS = float64(n) / time.Since(start).Seconds()

	s, err := natsstore.Dial(ctx, srv.ClientURL(), natsstore.Options{})
	if err != nil {
		return res, err
	}
	defer s.Close()
	data, _ := json.Marshal(map[string]string{"id": "bench", "leader": "leader"})
	if err := s.CreateRun(ctx, &events.Event{Seq: 1, At: events.Now(), Type: events.RunCreated, Run: "bench", Data: data}); err != nil {
		return res, err
	}
	ev := func(seq int64) *events.Event {
		return &events.Event{Seq: seq, At: events.Now(), Type: events.MessageSent, Run: "bench", Task: "t1", Actor: "leader",
			Message: &events.Message{ID: fmt.Sprint("m", seq), Seq: seq, Kind: events.KindSteer, Body: string(body[:200])}}
	}
	seq := int64(1)
	start = time.Now()
	for range n {
		seq++
		if err := s.Append(ctx, ev(seq), fmt.Sprint("op", seq)); err != nil {
			return res, err
		}
	}
	res.SendPerS = float64(n) / time.Since(start).Seconds()
	res.SendRatio = res.SendPerS / res.RawPublishPerS

	// Wake-up: a waiter on another connection, woken by the append.
	s2, err := natsstore.Dial(ctx, srv.ClientURL(), natsstore.Options{})
	if err != nil {
		return res, err
	}
	defer s2.Close()
	var lat []float64
	for range samples {
		w, err := s2.Watch(ctx, "bench", seq)
		if err != nil {
			return res, err
		}
		woke := make(chan time.Time, 1)
		go func() {
			w.Wait(ctx)
			woke <- time.Now()
		}()
		time.Sleep(2 * time.Millisecond) // the waiter is blocked
		seq++
		if err := s.Append(ctx, ev(seq), fmt.Sprint("op", seq)); err != nil {
			return res, err
		}
		returned := time.Now()
		at := <-woke
		w.Close()
		lat = append(lat, max(0, float64(at.Sub(returned).Microseconds())/1000))
	}
	sort.Float64s(lat)
	res.WakeP50ms = lat[len(lat)/2]
	res.WakeP99ms = lat[len(lat)*99/100]
	return res, nil
}
