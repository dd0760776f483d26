//go:build unix && !aix

package dblock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// heldFile is a descriptor of the database file itself, flocked for as
// long as the Lock is held.
type heldFile struct {
	f  *os.File
	id fileID
}

type fileID struct{ dev, ino uint64 }

// held are the database files this process holds: a second holder in
// the process is refused from here, before it opens a descriptor of the
// file, since closing that descriptor would drop the POSIX locks SQLite
// holds on the file for the first.
var (
	heldMu sync.Mutex
	held   = map[fileID]bool{}
)

// holdFile takes an exclusive flock on the database file at db, if it is
// a regular file, besides the lock file's: the lock file can be removed
// or replaced by anyone who can write the directory, the database file
// cannot be without the live store then writing to a file nobody else
// opens. flock and SQLite's POSIX locks do not interact on the platforms
// where this runs. Nothing exists yet: nil, the lock file alone holds the
// file its holder creates.
func holdFile(db string) (*heldFile, error) {
	fi, err := os.Stat(db)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil // not a database file: the opener says so
	}
	id := idOf(fi)
	heldMu.Lock()
	defer heldMu.Unlock()
	if held[id] {
		return nil, fmt.Errorf("%s: %w", db, ErrHeld)
	}
	f, err := os.OpenFile(db, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("hold %s: %w", db, err)
	}
	if now, err := f.Stat(); err != nil || idOf(now) != id {
		f.Close()
		return nil, fmt.Errorf("hold %s: the file was replaced while being locked", db)
	}
	if err := lockOrClose(f, db); err != nil {
		return nil, err
	}
	held[id] = true
	return &heldFile{f: f, id: id}, nil
}

func idOf(fi fs.FileInfo) fileID {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}
	}
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)}
}

// release closes the held descriptor (after the database's connections,
// see Release) and forgets the file.
func (h *heldFile) release() {
	if h == nil {
		return
	}
	heldMu.Lock()
	delete(held, h.id)
	heldMu.Unlock()
	h.f.Close()
}

func (h *heldFile) file() *os.File {
	if h == nil {
		return nil
	}
	return h.f
}
