package dblock

import "errors"

// ErrHeld means another open description of the lock file (another store,
// in this process or another, or a running migrate up) holds the lock.
var ErrHeld = errors.New("database lock held by another writer")
