// Package jsonl reads and appends files of newline-terminated JSON records
// ("JSON Lines", https://jsonlines.org), the format of crew's event log and
// mailbox files.
//
// Rules shared by every such file:
//
//   - A record is one line ending in '\n'. Lines have no length limit: they
//     are read with bufio.Reader, never bufio.Scanner (whose 64 KiB default
//     would cut a long body).
//   - The last line of a file without a trailing '\n' is a torn write (the
//     writer crashed, or is still writing). Readers do not show it and do not
//     call it damage; the next writer, holding the file's lock, cuts it off
//     (CutTorn) so its own record is never glued to it.
//   - Records that carry a "seq" are in seq order, so a seq is found by
//     binary search over byte offsets (SeekSeq) in O(log n) reads.
package jsonl
