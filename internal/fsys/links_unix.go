//go:build unix

package fsys

import (
	"io/fs"
	"syscall"
)

// Links returns the number of hard links (names) of the file fi describes
// (stat(2) st_nlink), or 1 where the system does not say.
func Links(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// Owner returns the user id of the owner of the file fi describes
// (stat(2) st_uid); ok is false where the system does not say.
func Owner(fi fs.FileInfo) (uid int, ok bool) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), true
	}
	return 0, false
}
