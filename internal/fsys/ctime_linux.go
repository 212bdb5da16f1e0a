package fsys

import (
	"io/fs"
	"syscall"
	"time"
)

// ChangeTime returns when the file fi describes last changed, its data
// or its metadata (stat(2) st_ctime), and ok=false where the system does
// not say. Unlike the modification time, no program can set it (utimes(2),
// touch -r), so two stats with the same change time saw the same file.
func ChangeTime(fi fs.FileInfo) (t time.Time, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(st.Ctim.Sec, st.Ctim.Nsec), true
}
