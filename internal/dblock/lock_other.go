//go:build !(unix && !aix) && !windows

package dblock

import (
	"errors"
	"os"
)

var errWouldBlock = errors.New("would block")

// lock refuses: this platform has no lock that ends with its process, and
// a lock that can outlive a killed process would refuse every later open.
func lock(*os.File) error {
	return errors.ErrUnsupported
}

// noFollow is 0: this platform's open has no such flag.
const noFollow = 0

func isLoop(error) bool { return false }
