//go:build windows

package dblock

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

var errWouldBlock = windows.ERROR_LOCK_VIOLATION

// lock takes an exclusive lock on the first byte of f, failing with
// errWouldBlock at once if another handle holds it. Closing the handle
// (or the process ending) releases it.
func lock(f *os.File) error {
	var ol windows.Overlapped
	err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
	if errors.Is(err, windows.ERROR_IO_PENDING) {
		return errWouldBlock
	}
	return err
}

// noFollow is 0: this platform's open has no such flag.
const noFollow = 0

func isLoop(error) bool { return false }
