package nats

import (
	"context"

	"github.com/crew-dev/crew/store"
)

// EventsRead is how many events the store's Reads have decoded.
func (s *Store) EventsRead() int64 { return s.read.Load() }

// SnapshotFields are the fields of a snapshot a test changes.
type SnapshotFields struct {
	doc snapshotDoc
	Seq int64 // the snapshot's seq and its state's
	Sum string
}

// DecodeSnapshot decodes a snapshot's value.
func DecodeSnapshot(t interface{ Fatal(...any) }, data []byte) SnapshotFields {
	doc, err := decodeSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	return SnapshotFields{doc: *doc, Seq: doc.Seq, Sum: doc.Sum}
}

// EncodeSnapshot encodes f as a snapshot's value.
func EncodeSnapshot(t interface{ Fatal(...any) }, f SnapshotFields) []byte {
	st := f.doc.State.Copy()
	st.Seq = f.Seq
	st.Open = snapshotState(&snapshotDoc{Version: snapshotVersion, Run: f.doc.Run, Seq: f.Seq, Sum: f.Sum, State: st, Open: f.doc.Open}).Open
	data, err := encodeSnapshot(st, f.Sum)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// WaiterReadsLog reports whether w, a participant waiter (Log.Watch
// with participants), reads the log at its rescans: the server has no
// WakeStream, or it could not be read.
func WaiterReadsLog(w store.Waiter) bool { return w.(*wakeWaiter).byLog }

// Rescan runs w's rescan once and reports whether it wakes w's owner.
func Rescan(w store.Waiter) bool { return w.(*wakeWaiter).missed(context.Background()) }
