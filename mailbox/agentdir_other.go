//go:build !unix

package mailbox

import "os"

// createExcl creates the new file rel in d for writing (O_EXCL: never an
// existing file), through os.Root, which refuses links.
func (d *AgentDir) createExcl(rel string, perm os.FileMode) (*os.File, error) {
	return d.r.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
}

// openRW opens the file name in d for reading and writing, through
// os.Root, which refuses links out of d.
func (d *AgentDir) openRW(name string) (markFile, error) {
	f, err := d.r.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

type osFile struct{ *os.File }

func (f osFile) regularSize() (int64, bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, false, err
	}
	return fi.Size(), fi.Mode().IsRegular(), nil
}
