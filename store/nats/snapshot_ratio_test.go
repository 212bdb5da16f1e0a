package nats

import (
	"bytes"
	"compress/gzip"
	"io"
	"testing"

	sjson "github.com/segmentio/encoding/json"

	"github.com/crew-dev/crew/internal/statetest"
	"github.com/crew-dev/crew/state"
)

// TestSnapshotRatio: a snapshot's value that grows more than
// snapshotRatio when decompressed is refused (the state is then rebuilt
// from the log), a crew snapshot is read. The breaker's bomb was a
// value of 204 KB that grew to 200 MB: every crew process spent 1.9 s
// and 417 MB on it.
func TestSnapshotRatio(t *testing.T) {
	st := state.New()
	st.Run, st.Seq = "r1", 1
	value, err := encodeSnapshot(st, "sum")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeSnapshot(value); err != nil {
		t.Fatalf("crew's snapshot: %v", err)
	}
	doc := gunzip(t, value)
	// The same document after 8 MiB of spaces: the same JSON, grown a
	// thousand times.
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(bytes.Repeat([]byte(" "), 8<<20))
	zw.Write(doc)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := decodeSnapshot(buf.Bytes()); err == nil {
		t.Fatalf("a value of %d bytes that grows to %d was read", buf.Len(), 8<<20+len(doc))
	}
}

// TestDecodeSnapshotAsStdlib: segmentio's decoder, which decodeSnapshot uses,
// reads what encoding/json reads, or refuses it too: crew's own value
// with every field set, and its variants (statetest.Variants).
func TestDecodeSnapshotAsStdlib(t *testing.T) {
	st := statetest.Full()
	value, err := encodeSnapshot(st, "sum")
	if err != nil {
		t.Fatal(err)
	}
	doc := gunzip(t, value)
	if _, err := decodeSnapshot(value); err != nil {
		t.Fatalf("crew's snapshot: %v", err)
	}
	for name, text := range statetest.Variants(string(doc)) {
		statetest.SameAsStdlib(t, name, text, func(data []byte, doc *snapshotDoc) error { return sjson.Unmarshal(data, doc) })
	}
}

// gunzip returns the decompressed bytes of a snapshot's value.
func gunzip(t *testing.T, value []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(value))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}
