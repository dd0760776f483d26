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

// noFollow makes opening the lock file fail on a symbolic link.
const noFollow = unix.O_NOFOLLOW

// isLoop reports whether err is what opening a symbolic link with
// noFollow fails with.
func isLoop(err error) bool { return errors.Is(err, unix.ELOOP) }
