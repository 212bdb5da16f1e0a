//go:build !unix

package fsys

import "io/fs"

// Links returns 1: this system's FileInfo does not give the number of
// hard links of a file.
func Links(fi fs.FileInfo) uint64 { return 1 }

// Owner returns false: this system's FileInfo does not give the owner
// of a file.
func Owner(fi fs.FileInfo) (uid int, ok bool) { return 0, false }
