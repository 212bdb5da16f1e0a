package nats

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sjson "github.com/segmentio/encoding/json"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/state"
)

// SnapshotBucket is the key-value bucket of the runs' state snapshots
// (docs/nats.md, Snapshots): the key <run> holds run's whole state
// (tasks and open messages) as of a seq of its log, so that a process
// opening the run replays only the events after it instead of the whole
// stream. A snapshot is a projection of the log, never its source of
// truth:
//
//   - It names the seq it was taken at and the SHA-256 of the stream's
//     message at that seq; a reader gets that message and uses the
//     snapshot only if it is still there with the same content (a run
//     deleted and made again under the same id has other messages).
//     Anything else, or no snapshot, or one that cannot be decoded, and
//     the reader replays the stream from its start, as before snapshots.
//   - Its seq is at most the run's projection mark (projected.<run> in
//     MailBucket): every mail-tree copy up to it is delivered. The
//     writer moves the mark to the seq, then writes the snapshot; a
//     reader reads the snapshot, then the mark, and uses it only if the
//     mark has reached its seq. So a writer that starts from a snapshot
//     has no copy to deliver from before it, and one that died between
//     the two writes left a mark ahead of the snapshot, which is safe.
//   - Only a process that may move the mark writes it: the leader's, or
//     any without crew credentials (no authorization). A worker's
//     credentials may read snapshots but not write them (Permissions): a
//     forged snapshot would be a way around the log that the server
//     cannot check. A worker's process therefore never writes one, and
//     reads the leader's.
//   - A writer writes one after a burst, not every commit: when its state
//     is snapshotDue past the snapshot it started from (or last wrote).
//     Two writers may write at once; each snapshot is valid, so the last
//     put wins, even if it is the older one: a reader then replays a few
//     more events.
//
// The value is the gzip-compressed JSON of snapshotDoc. A snapshot
// larger than the server's max_payload is not written (readers replay
// the log); crew asks for max_payload: 8MB (Durability), which holds the
// compressed state of many thousands of tasks.
const SnapshotBucket = "CREW_SNAPSHOTS"

// snapshotVersion is snapshotDoc.Version: a reader ignores a snapshot
// of another version (and replays the log).
const snapshotVersion = 1

// snapshotDoc is a snapshot's value, before compression:
//
//	{"v":1,"run":"r1","seq":812,"sum":"<SHA-256 of message 812, hex>",
//	 "state":{"seq":812,"run":"r1","leader":"lead","tasks":{…},"files":{…}},
//	 "open":[{"key":"<id>","id":"<id>","seq":790,"task":"t3",…},…]}
//
// state is the state as tasks.json holds it on the file store (tasks,
// files; never damage: a damaged state is not written); open the open
// messages in seq order, each with its key in State.Open.
type snapshotDoc struct {
	Version int          `json:"v"`
	Run     string       `json:"run"`
	Seq     int64        `json:"seq"`
	Sum     string       `json:"sum"`
	State   *state.State `json:"state"`
	Open    []openEntry  `json:"open"`
}

// openEntry is one open message of a snapshot and its key in State.Open.
type openEntry struct {
	Key string `json:"key"`
	state.Open
}

// snapshotDue reports whether a state at seq should be written as a
// snapshot when the last one this process knows of is at since (0: none
// known): once the events after it cost a reader more to replay than a
// snapshot of the state costs to write and read (128 events, one more
// per eight tasks and open messages).
func snapshotDue(st *state.State, since int64) bool {
	return st.Seq-since >= 128+int64(len(st.Tasks)+len(st.Open))/8
}

// maySnapshot reports whether this store's credentials may write
// snapshots and move the projection mark: any but a worker's.
func (s *Store) maySnapshot() bool { return s.role != RoleWorker }

// messageSum is the SHA-256, in hex, of a stream message's data.
func messageSum(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// snapshotSubject is the subject of run's snapshot in SnapshotBucket.
func snapshotSubject(run string) string { return "$KV." + SnapshotBucket + "." + run }

// loadSnapshot returns run's snapshot when there is one that matches the
// log (its seq's message has its sum), or nil: a missing, unreadable,
// foreign or stale-beyond-the-log snapshot is ignored, and the caller
// replays the log. It is one direct get of the snapshot (a replica may
// answer: an older snapshot is as good) and one get of the message at its
// seq from the stream's leader.
func (s *Store) loadSnapshot(ctx context.Context, run string) *state.State {
	rctx, cancel := s.bound(ctx)
	defer cancel()
	m, err := s.nc.RequestWithContext(rctx, "$JS.API.DIRECT.GET.KV_"+SnapshotBucket+"."+snapshotSubject(run), nil)
	if err != nil || m.Header.Get("Status") != "" || len(m.Data) == 0 {
		return nil // no bucket (no responders), no key (404), a deleted key
	}
	doc, err := decodeSnapshot(m.Data)
	if err != nil || doc.Run != run {
		return nil
	}
	st, err := s.stream(ctx, run)
	if err != nil {
		return nil
	}
	msg, err := st.GetMsg(rctx, uint64(doc.Seq))
	if err != nil || messageSum(msg.Data) != doc.Sum {
		return nil
	}
	return snapshotState(doc)
}

// snapshotRatio is the most a snapshot's value may grow when
// decompressed (and minSnapshotLimit the least it may always grow to,
// maxSnapshotLimit the most): crew's snapshots, gzip's BestSpeed of
// JSON, grow some 6 times (100 tasks each with an open question:
// 10 KB to 64 KB). One that grows more is no crew's (a
// value of 204 KB growing to 200 MB cost every crew process 1.9 s and
// 417 MB): it is refused, and the state rebuilt from the log.
//
// presizeRatio is how many times the value decodeSnapshot's buffer may
// be made at first (crew's snapshots of 1,000 waiting tasks grow about
// 18 times).
const (
	presizeRatio     = 32
	snapshotRatio    = 100
	minSnapshotLimit = 1 << 20
	maxSnapshotLimit = 1 << 30
)

// decodeSnapshot decompresses and decodes a snapshot's value, checking
// its shape and that it grows no more than snapshotRatio.
func decodeSnapshot(data []byte) (*snapshotDoc, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	limit := min(max(int64(len(data))*snapshotRatio, minSnapshotLimit), maxSnapshotLimit)
	// The buffer is made once, at the size gzip's trailer says (ISIZE,
	// RFC 1952, 2.3.1), instead of doubling its way there: up to
	// presizeRatio times the value, so a trailer that lies costs no more
	// room than a snapshot that size would. A snapshot of 1,000 waiting
	// tasks (600 KB) then leaves 0.8 MB less garbage in a process that
	// has just started.
	var buf bytes.Buffer
	if n := len(data); n >= 4 {
		isize := int64(binary.LittleEndian.Uint32(data[n-4:]))
		buf.Grow(int(min(isize, int64(n)*presizeRatio, limit)) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(io.LimitReader(zr, limit+1)); err != nil {
		return nil, fmt.Errorf("snapshot of %d bytes: %w", len(data), err)
	}
	plain := buf.Bytes()
	if int64(len(plain)) > limit {
		return nil, fmt.Errorf("snapshot of %d bytes: grows past %d bytes", len(data), limit)
	}
	// segmentio's decoder gives what encoding/json gives
	// (TestDecodeSnapshotAsStdlib) in less than half the time: every
	// command on a run of a thousand waiting tasks decodes some 600 KB
	// here (11.5 ms with encoding/json, 3.7 to 4.9 with segmentio's).
	var doc snapshotDoc
	if err := sjson.Unmarshal(plain, &doc); err != nil {
		return nil, fmt.Errorf("snapshot of %d bytes: %w", len(data), err)
	}
	st := doc.State
	if doc.Version != snapshotVersion || doc.Seq < 1 || st == nil || st.Seq != doc.Seq || st.Run != doc.Run || len(st.Damage) > 0 {
		return nil, errors.New("not a crew snapshot")
	}
	return &doc, nil
}

// snapshotState returns the whole state doc holds, or nil if an open
// message is not well formed.
func snapshotState(doc *snapshotDoc) *state.State {
	st := state.New()
	st.Seq, st.Offset, st.Run, st.Leader = doc.Seq, 0, doc.Run, doc.State.Leader
	if doc.State.Tasks != nil {
		st.Tasks = doc.State.Tasks
	}
	if doc.State.Files != nil {
		st.Files = doc.State.Files
	}
	for _, t := range st.Tasks {
		if t == nil {
			return nil
		}
	}
	st.Open = make(map[string]*state.Open, len(doc.Open))
	for i := range doc.Open {
		e := &doc.Open[i]
		if e.ID == "" || (e.Key != e.ID && e.Key != state.Key(e.ID, events.Broadcast, e.Task)) {
			return nil
		}
		o := e.Open
		o.Task, o.Kind, o.File, o.Priority, o.Status, o.From = state.Intern(o.Task), state.Intern(o.Kind), state.Intern(o.File), state.Intern(o.Priority), state.Intern(o.Status), state.Intern(o.From)
		st.Open[e.Key] = &o
	}
	return st
}

// encodeSnapshot returns the value of a snapshot of st, whose seq's
// message has the given sum.
func encodeSnapshot(st *state.State, sum string) ([]byte, error) {
	doc := snapshotDoc{Version: snapshotVersion, Run: st.Run, Seq: st.Seq, Sum: sum, State: st, Open: make([]openEntry, 0, len(st.Open))}
	for k, o := range st.Open {
		doc.Open = append(doc.Open, openEntry{Key: k, Open: *o})
	}
	sort.Slice(doc.Open, func(i, j int) bool {
		a, b := doc.Open[i], doc.Open[j]
		if a.Seq != b.Seq {
			return a.Seq < b.Seq
		}
		return a.Key < b.Key
	})
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	enc := json.NewEncoder(zw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// snapshotBucket returns SnapshotBucket, creating it if the server has
// none.
func (s *Store) snapshotBucket(ctx context.Context) (jetstream.KeyValue, error) {
	s.mu.Lock()
	kv := s.snapKV
	s.mu.Unlock()
	if kv != nil {
		return kv, nil
	}
	kv, err := s.keyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      SnapshotBucket,
		Description: "crew: each run's state as of a seq of its log, a projection readers start from",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    s.opts.Replicas,
	})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.snapKV = kv
	s.mu.Unlock()
	return kv, nil
}

// writeSnapshot writes st, the state of run at st.Seq, as run's snapshot.
// The caller has made sure that every mail-tree copy up to st.Seq is
// delivered and the projection mark is there (the order that makes it
// safe: SnapshotBucket). A snapshot too large for the server is not
// written, and says so.
func (s *Store) writeSnapshot(ctx context.Context, st *state.State) error {
	stream, err := s.stream(ctx, st.Run)
	if err != nil {
		return err
	}
	rctx, cancel := s.bound(ctx)
	defer cancel()
	msg, err := stream.GetMsg(rctx, uint64(st.Seq))
	if err != nil {
		return err
	}
	data, err := encodeSnapshot(st, messageSum(msg.Data))
	if err != nil {
		return err
	}
	if int64(len(data)) > s.nc.MaxPayload()-1024 {
		return fmt.Errorf("snapshot of run %s at seq %d: %d bytes, over the server's max_payload: %w", st.Run, st.Seq, len(data), nats.ErrMaxPayload)
	}
	kv, err := s.snapshotBucket(rctx)
	if err != nil {
		return err
	}
	_, err = kv.Put(rctx, st.Run, data)
	return err
}
