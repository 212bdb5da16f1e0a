package mailbox_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/fsys"
	"github.com/crew-dev/crew/mailbox"
)

// msg is a steer with seq seq.
func msg(seq int64, body string) events.Message {
	return events.Message{ID: fmt.Sprintf("0193a1c2-7b1e-7c3d-9e2f-%012d", seq), Seq: seq, Run: "r1", Task: "t1",
		Kind: events.KindSteer, Direction: events.Inbox, From: "leader", To: "t1", Body: body, Priority: "normal",
		Status: events.StatusPending, SentAt: events.Time{Time: time.Date(2026, 11, 29, 21, 4, 5, 0, time.UTC)}}
}

func msgLine(t *testing.T, seq int64) string {
	t.Helper()
	m := msg(seq, "body")
	line, err := events.Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	return string(line)
}

// readSeqs reads a mailbox file after since and returns the seqs of the
// messages and the errors met.
func readSeqs(t *testing.T, path string, since int64) (seqs []int64, errs []error) {
	t.Helper()
	c, err := mailbox.Read(path, since)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; ; i++ {
		if i > 10000 {
			t.Fatal("cursor never reached EOF")
		}
		m, err := c.Next()
		if err == io.EOF {
			return seqs, errs
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		seqs = append(seqs, m.Seq)
	}
}

func fmtSeqs(s []int64) string { return fmt.Sprint(s) }

func TestAppendLastSeqRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), mailbox.SteeringFile)
	if seq, err := mailbox.LastSeq(path); seq != 0 || err != nil {
		t.Fatalf("LastSeq of a missing file = %d, %v", seq, err)
	}
	if seqs, errs := readSeqs(t, path, 0); len(seqs)+len(errs) > 0 {
		t.Fatalf("Read of a missing file gave %v, %v", seqs, errs)
	}
	// Sparse seqs, as in a real mailbox: the log holds other events too.
	if err := mailbox.Append(path, 0o600, []events.Message{msg(2, "a"), msg(5, "b")}); err != nil {
		t.Fatal(err)
	}
	if err := mailbox.Append(path, 0o600, []events.Message{msg(9, "c"), msg(30, "d")}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mailbox file mode %v, %v; want 0600", fi.Mode(), err)
	}
	if seq, err := mailbox.LastSeq(path); seq != 30 || err != nil {
		t.Errorf("LastSeq = %d, %v; want 30", seq, err)
	}
	cases := map[int64]string{0: "[2 5 9 30]", 1: "[2 5 9 30]", 2: "[5 9 30]", 3: "[5 9 30]", 5: "[9 30]", 29: "[30]", 30: "[]", 31: "[]", 1000: "[]"}
	for since, want := range cases {
		seqs, errs := readSeqs(t, path, since)
		if fmtSeqs(seqs) != want || len(errs) > 0 {
			t.Errorf("Read(since %d) = %v, %v; want %s", since, seqs, errs, want)
		}
	}
	c, _ := mailbox.Read(path, 4)
	m, err := c.Next()
	c.Close()
	if err != nil || m.Body != "b" || m.ID != msg(5, "").ID || m.Kind != events.KindSteer {
		t.Errorf("message after 4 = %+v, %v", m, err)
	}
}

func TestLongBodyRoundTrips(t *testing.T) {
	path := filepath.Join(t.TempDir(), mailbox.InboxFile)
	var body strings.Builder
	for i := 0; body.Len() < 900<<10; i++ {
		fmt.Fprintf(&body, "line %d: <tag> & \"quote\" \\ ünïcödé\t\n", i)
	}
	if err := mailbox.Append(path, 0o600, []events.Message{msg(1, "short"), msg(2, body.String()), msg(3, "after")}); err != nil {
		t.Fatal(err)
	}
	c, err := mailbox.Read(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m, err := c.Next()
	if err != nil || m.Body != body.String() {
		t.Fatalf("the %d-byte body came back as %d bytes, %v", body.Len(), len(m.Body), err)
	}
	if m, err := c.Next(); err != nil || m.Seq != 3 {
		t.Fatalf("the message after the long one: %+v, %v", m, err)
	}
}

func TestTornTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), mailbox.OutboxFile)
	good := msgLine(t, 3) + msgLine(t, 7)
	if err := os.WriteFile(path, []byte(good+`{"id":"x","seq":9,"bo`), 0o600); err != nil {
		t.Fatal(err)
	}
	if seq, err := mailbox.LastSeq(path); seq != 7 || err != nil {
		t.Errorf("LastSeq with a torn tail = %d, %v; want 7", seq, err)
	}
	if seqs, errs := readSeqs(t, path, 0); fmtSeqs(seqs) != "[3 7]" || len(errs) > 0 {
		t.Errorf("Read with a torn tail = %v, %v", seqs, errs)
	}
	if seqs, errs := readSeqs(t, path, 7); len(seqs)+len(errs) > 0 {
		t.Errorf("Read(since 7) with a torn tail = %v, %v", seqs, errs)
	}
	if err := mailbox.Append(path, 0o600, []events.Message{msg(9, "body")}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if string(data) != good+msgLine(t, 9) {
		t.Errorf("after Append the file is\n%s\nwant the torn line cut and the new one after the complete lines", data)
	}
	// Only a torn line: LastSeq 0, nothing read.
	if err := os.WriteFile(path, []byte(`{"id":"x","seq":9,"bo`), 0o600); err != nil {
		t.Fatal(err)
	}
	if seq, err := mailbox.LastSeq(path); seq != 0 || err != nil {
		t.Errorf("LastSeq of a torn-only file = %d, %v", seq, err)
	}
}

func TestDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), mailbox.InboxFile)
	l2, l4 := msgLine(t, 2), msgLine(t, 4)
	data := l2 + "{not json\n" + l4 + msgLine(t, 3) + `{"seq":6}` + "\n" + msgLine(t, 8)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	seqs, errs := readSeqs(t, path, 0)
	if fmtSeqs(seqs) != "[2 4 8]" || len(errs) != 3 {
		t.Fatalf("Read = %v, %v; want 2 4 8 and three damages", seqs, errs)
	}
	wants := []string{path + ":line 2:", path + ":line 4:", path + ":line 5:"}
	for i, err := range errs {
		var de *events.DamageError
		if !errors.As(err, &de) || !errors.Is(err, crew.ErrDamaged) {
			t.Errorf("error %v is not a DamageError wrapping crew.ErrDamaged", err)
			continue
		}
		if !strings.Contains(err.Error(), wants[i]) {
			t.Errorf("damage %q does not say %q", err, wants[i])
		}
	}
	if !strings.Contains(errs[1].Error(), "seq 3 out of order") {
		t.Errorf("a descending seq reads as %q", errs[1])
	}
	if de := errs[0].(*events.DamageError); de.Offset != int64(len(l2)) || de.Len != int64(len("{not json\n")) {
		t.Errorf("DamageError = %+v", de)
	}

	// A damaged last line: LastSeq says so rather than guessing.
	if err := os.WriteFile(path, []byte(l2+"{oops\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := mailbox.LastSeq(path); !errors.Is(err, crew.ErrDamaged) {
		t.Errorf("LastSeq of a file ending in damage = %v, want crew.ErrDamaged", err)
	}
}

// TestAppendRollsBack: a write that fails halfway leaves the file as it
// was.
func TestAppendRollsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), mailbox.InboxFile)
	if err := mailbox.Append(path, 0o600, []events.Message{msg(1, "a")}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	restore := fsys.SetFault(func(op fsys.Op, p string) error {
		if op == fsys.OpWrite && p == path {
			return syscall.ENOSPC
		}
		return nil
	})
	err := mailbox.Append(path, 0o600, []events.Message{msg(2, strings.Repeat("b", 10000))})
	restore()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append on a full disk = %v, want ENOSPC", err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Fatalf("the failed Append left %d bytes, want the %d before it", len(after), len(before))
	}
}
