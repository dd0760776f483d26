//go:build unix

package main

import (
	"io/fs"
	"syscall"
)

// openNonBlocking is the flag that keeps an open of a FIFO from waiting
// for a writer.
const openNonBlocking = syscall.O_NONBLOCK

// links returns how many names the file fi describes has.
func links(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
