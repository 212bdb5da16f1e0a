// Package tail keeps the last bytes of an output: a Buffer that a
// process writes into (a done-when check's output), and File, the end of
// a file (a supervised worker's log). Both start what they return at a
// whole UTF-8 character when they cut the front.
package tail

import (
	"io"
	"os"
	"sync"
	"unicode/utf8"

	"github.com/crew-dev/crew/internal/fsys"
)

// Buffer is an io.Writer that keeps only the last Max bytes written. It
// is safe for concurrent use (a command's stdout and stderr may both
// write to it).
type Buffer struct {
	Max int // bytes kept

	mu    sync.Mutex
	buf   []byte
	extra bool // bytes were dropped from the front
}

// Write keeps the last Max bytes of what was written so far and p. It
// never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if len(p) >= b.Max {
		b.buf = append(b.buf[:0], p[len(p)-b.Max:]...)
		b.extra = true
		return n, nil
	}
	if over := len(b.buf) + len(p) - b.Max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
		b.extra = true
	}
	b.buf = append(b.buf, p...)
	return n, nil
}

// String returns the kept bytes, starting at a whole UTF-8 character when
// the front was cut.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf
	if b.extra {
		for i := 0; i < len(s) && i < utf8.UTFMax; i++ {
			if utf8.RuneStart(s[i]) {
				s = s[i:]
				break
			}
		}
	}
	return string(s)
}

// File returns the last max bytes of the file at path after offset from
// ("" when it cannot be read), starting at a whole UTF-8 character.
// Only a regular file is read (fsys.OpenNoFollow): a FIFO put in the
// file's place would block the open, a link be read through.
func File(path string, from int64, max int) string {
	f, err := fsys.OpenNoFollow(path, os.O_RDONLY, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	if start := fi.Size() - int64(max); start > from {
		from = start
	}
	b := &Buffer{Max: max}
	if _, err := io.Copy(b, io.NewSectionReader(f, from, fi.Size()-from)); err != nil {
		return ""
	}
	b.extra = b.extra || from > 0
	return b.String()
}
