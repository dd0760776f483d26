//go:build unix

package sqlitestore

import "golang.org/x/sys/unix"

// writable reports whether this process may write the file at name.
func writable(name string) bool { return unix.Access(name, unix.W_OK) == nil }
