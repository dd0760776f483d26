//go:build !(unix && !aix)

package dblock

import "os"

// heldFile is nothing here: on Windows a lock on the database file would
// be a mandatory byte-range lock beside SQLite's own, and other platforms
// lock nothing. The lock file alone holds the database.
type heldFile struct{}

func holdFile(string) (*heldFile, error) { return nil, nil }

func (*heldFile) release() {}

func (*heldFile) file() *os.File { return nil }
