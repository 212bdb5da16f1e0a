package nats_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/crew-dev/crew/events"
	natsstore "github.com/crew-dev/crew/store/nats"
)

// dial connects a Store to url with o, closed by t.Cleanup.
func dial(t testing.TB, url string, o natsstore.Options) *natsstore.Store {
	t.Helper()
	s, err := natsstore.Dial(context.Background(), url, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// natsConn is a plain NATS connection to url, closed by t.Cleanup.
func natsConn(t *testing.T, url string) *nats.Conn {
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// created is a run.created event for run id, seq 1.
func created(id string) *events.Event {
	data, _ := json.Marshal(map[string]string{"id": id, "leader": "leader"})
	return &events.Event{Seq: 1, At: events.Now(), Type: events.RunCreated, Run: id, Actor: "leader", Data: data}
}
