package sqlitestore

import (
	"errors"
	"fmt"

	"github.com/securemsg/storage/internal/dblock"
	"github.com/securemsg/storage/store"
)

// holdFile takes the writer lock of the database file at path (package
// internal/dblock: an flock on the sidecar path+"-lock", never a
// descriptor of the database file itself, whose closing would drop
// SQLite's own POSIX locks), or returns an error wrapping store.ErrInUse
// naming the file if another open store, in this process or another,
// holds it. SQLite's in-memory database names no file: nil, nil (Open then
// refuses it, since it cannot run in WAL mode).
func holdFile(path string) (*dblock.Lock, error) {
	if inMemory(path) {
		return nil, nil
	}
	l, err := dblock.Acquire(path)
	if errors.Is(err, dblock.ErrHeld) {
		return nil, fmt.Errorf("store: open %s: %w: another open store holds the database file (%v)", path, store.ErrInUse, err)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return l, nil
}

// inMemory reports whether path names no file but SQLite's in-memory (or
// temporary) database.
func inMemory(path string) bool { return path == "" || path == ":memory:" }
