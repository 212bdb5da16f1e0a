package nats

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
