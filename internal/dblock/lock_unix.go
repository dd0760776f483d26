//go:build unix && !aix

package dblock

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

var errWouldBlock = unix.EWOULDBLOCK

// lock takes an exclusive flock on f, failing with errWouldBlock at once
// if another open description holds one. EINTR (a signal during the call)
// is retried.
func lock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
