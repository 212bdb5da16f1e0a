// Package fsys is the narrow seam through which crew's write path touches
// the disk, so that tests can make a chosen operation fail the way a full
// or broken disk does (ENOSPC, EIO) without filling a real one.
//
// Only the operations whose failure crew must survive go through here:
// writing, fsync(2), truncating, renaming, linking and creating files and
// directories. Each wrapper first asks the installed Fault (if any) whether
// to fail; when it says no it does exactly what the os call does. In
// production no Fault is installed and the cost is one atomic load.
package fsys
