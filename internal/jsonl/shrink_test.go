package jsonl

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// shrinkingFile is a file whose Stat reports a larger size (stale) the
// first staleN times: what a reader sees when a writer cuts a torn last
// line off (CutTorn, after a crash) between the reader's stat and its
// read, or on a FUSE file system whose size runs ahead of its data.
type shrinkingFile struct {
	*bytes.Reader
	stale   int64
	staleN  int // Stat calls still answered with stale
	current int64
}

type fakeInfo struct {
	fs.FileInfo
	size int64
}

func (i fakeInfo) Size() int64 { return i.size }

func (f *shrinkingFile) Stat() (fs.FileInfo, error) {
	if f.staleN > 0 {
		f.staleN--
		return fakeInfo{size: f.stale}, nil
	}
	return fakeInfo{size: f.current}, nil
}

// TestCompleteSizeOfAShrinkingFile: a file that is shorter than its stat
// said a moment before (a torn tail cut by a writer holding the lock,
// while a reader that takes no lock looks for the end of its complete
// lines) is measured where it ends, or again, not reported as an error
// (io.EOF, which made crew readers exit 1 with "crew: EOF").
func TestCompleteSizeOfAShrinkingFile(t *testing.T) {
	data := []byte("{\"seq\":1}\n{\"seq\":2}\n")
	for _, staleN := range []int{1, 3} {
		f := &shrinkingFile{Reader: bytes.NewReader(data), stale: int64(len(data)) + 40, staleN: staleN, current: int64(len(data))}
		complete, size, err := completeSize(f)
		if err != nil || complete != int64(len(data)) || size != int64(len(data)) {
			t.Errorf("stale stat %d times: completeSize = %d, %d, %v; want %d, %d, nil", staleN, complete, size, err, len(data), len(data))
		}
	}
	// Far shorter than its stat (nothing where the stat says its last
	// block is), measured again.
	f := &shrinkingFile{Reader: bytes.NewReader(data), stale: 10000, staleN: 2, current: int64(len(data))}
	if complete, size, err := completeSize(f); err != nil || complete != int64(len(data)) || size != int64(len(data)) {
		t.Errorf("far shorter than its stat: completeSize = %d, %d, %v; want %d, %d, nil", complete, size, err, len(data), len(data))
	}
	// A write whose size shows before its bytes (FUSE): what is there
	// counts, a torn line included.
	torn := append(bytes.Clone(data), `{"se`...)
	f = &shrinkingFile{Reader: bytes.NewReader(torn), stale: int64(len(torn)) + 100, staleN: 1, current: int64(len(torn))}
	if complete, size, err := completeSize(f); err != nil || complete != int64(len(data)) || size != int64(len(torn)) {
		t.Errorf("size ahead of the data: completeSize = %d, %d, %v; want %d, %d, nil", complete, size, err, len(data), len(torn))
	}
	// A file that stays far shorter is an error, not an endless loop.
	f = &shrinkingFile{Reader: bytes.NewReader(data), stale: 10000, staleN: 1 << 30}
	if _, _, err := completeSize(f); !errors.Is(err, io.EOF) {
		t.Errorf("a file that is always far shorter than its stat: error %v, want one wrapping io.EOF", err)
	}
}

// TestCompleteSizeWhileTornTailsAreCut: readers measure a real file while
// a writer puts a torn last line on it and cuts it off, over and over; no
// measurement fails, and each is a whole number of lines.
func TestCompleteSizeWhileTornTailsAreCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.jsonl")
	lines := bytes.Repeat([]byte("{\"seq\":1,\"body\":\"0123456789\"}\n"), 300)
	if err := os.WriteFile(path, lines, 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		torn := bytes.Repeat([]byte("x"), 9000)
		for {
			select {
			case <-stop:
				return
			default:
			}
			w.WriteAt(torn, int64(len(lines)))
			if _, _, err := CutTorn(w); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(20 * time.Microsecond) // a cut is rare: one per crash

		}
	}()
	r, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		complete, _, err := CompleteSize(r)
		if err != nil {
			t.Errorf("CompleteSize while torn tails are cut: %v", err)
			break
		}
		if complete != int64(len(lines)) {
			t.Errorf("CompleteSize = %d, want %d", complete, len(lines))
			break
		}
	}
	close(stop)
	wg.Wait()
}
