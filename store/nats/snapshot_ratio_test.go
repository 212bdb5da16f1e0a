package nats

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"io"
	"math"
	"runtime"
	"testing"

	sjson "github.com/segmentio/encoding/json"

	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/state/statetest"
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

// TestDecodeSnapshotForgedSize: decodeSnapshot makes its buffer at the
// size gzip's trailer says, but never more than presizeRatio times the
// value: a trailer that claims 4 GiB costs a reader no more room than
// that (and the value is refused: the trailer does not match), and one
// that claims too little still reads the whole snapshot.
func TestDecodeSnapshotForgedSize(t *testing.T) {
	if raceEnabled {
		t.Skip("counts bytes allocated, which the race detector changes")
	}
	value, err := encodeSnapshot(statetest.Full(), "sum")
	if err != nil {
		t.Fatal(err)
	}
	forged := func(isize uint32) []byte {
		v := bytes.Clone(value)
		binary.LittleEndian.PutUint32(v[len(v)-4:], isize)
		return v
	}
	cost := func(v []byte) (uint64, error) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := decodeSnapshot(v)
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc, err
	}
	honest, err := cost(value)
	if err != nil {
		t.Fatal(err)
	}
	big := forged(math.MaxUint32)
	grown, err := cost(big)
	if err == nil {
		t.Fatal("a value whose trailer does not match was read")
	}
	if most := honest + uint64(len(big))*presizeRatio; grown > most {
		t.Fatalf("a value of %d bytes claiming 4 GiB cost %d bytes (the honest one %d), want at most %d", len(big), grown, honest, most)
	}
	if _, err := decodeSnapshot(forged(1)); err == nil {
		t.Fatal("a value whose trailer does not match was read")
	}
	doc, err := decodeSnapshot(value)
	if err != nil || len(doc.State.Tasks) != 2 || len(doc.Open) != 2 {
		t.Fatalf("crew's snapshot: %+v, %v", doc, err)
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
