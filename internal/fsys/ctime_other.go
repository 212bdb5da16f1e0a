//go:build !linux

package fsys

import (
	"io/fs"
	"time"
)

// ChangeTime returns ok=false: the change time is read on Linux only.
func ChangeTime(fi fs.FileInfo) (t time.Time, ok bool) { return time.Time{}, false }
