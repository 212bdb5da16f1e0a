package mailbox

import (
	"bytes"
	"testing"
)

// FuzzParse checks that Parse never panics and that whatever it accepts
// survives a rewrite: Marshal succeeds, Parse of that gives the same Mail,
// Marshal is then stable byte for byte, and SetRead's byte edit flips only
// the read flag. Seeds are in testdata/fuzz/FuzzParse (the mail-async
// fixture's files among them). Run with go test -fuzz FuzzParse ./mailbox/.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data)
		if err != nil {
			return
		}
		out, err := m.Marshal()
		if err != nil {
			t.Fatalf("Parse accepted %q but Marshal fails: %v", data, err)
		}
		m2, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(Marshal(m)) fails: %v\nMarshal: %s", err, out)
		}
		if !sameMail(m, m2) {
			t.Fatalf("Parse(Marshal(m)) = %+v\nwant %+v", m2, m)
		}
		out2, err := m2.Marshal()
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("Marshal not stable: %s then %s (%v)", out, out2, err)
		}

		flipped, err := WithRead(data, !m.Read)
		if err != nil {
			t.Fatalf("WithRead: %v", err)
		}
		m3, err := Parse(flipped)
		if err != nil {
			t.Fatalf("Parse after WithRead fails: %v\n%q", err, flipped)
		}
		m.Read = !m.Read
		if !sameMail(m, m3) {
			t.Fatalf("after WithRead: %+v\nwant %+v", m3, m)
		}
	})
}
