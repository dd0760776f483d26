//go:build unix

package sqlitestore

import (
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// writable reports whether this process may write the file at name.
func writable(name string) bool { return unix.Access(name, unix.W_OK) == nil }

// links returns how many names the file fi describes has.
func links(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
