//go:build !unix

package fsys

import "os"

// openFile is os.OpenFile.
func openFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}
