// Package dblock holds a database file's writer lock: an exclusive lock
// on a sidecar file beside it, Path(db) ("<database>-lock"), which
// sqlitestore.Open takes for as long as the store is open and cmd/migrate's
// up for the length of its run, so that one writer at a time uses a file.
//
// The lock is first on a sidecar. SQLite locks the database with POSIX
// advisory (fcntl) locks, which the operating system drops for the whole
// process as soon as any descriptor of that file is closed: opening and
// closing the database file beside a live connection would silently undo
// SQLite's own locking. The sidecar is locked with flock (LockFileEx on
// Windows), which conflicts between any two open descriptions of the
// file, in one process or in two, and ends when its descriptor is closed:
// on Release, or when the process dies, so a killed process leaves no
// stale lock. The sidecar is created with O_NOFOLLOW (a planted symbolic
// link is refused, store.ErrSymlink) and left in place after Release; it holds
// nothing.
//
// Anyone who can write the directory can remove or replace the sidecar,
// so on unix the database file itself is flocked too, through a
// descriptor opened only when no Lock of this process holds the file (a
// registry by device and inode answers first, so no descriptor of a file
// a store of this process uses is ever opened and closed beside it) and
// closed by Release, after the caller's SQLite connections. flock does
// not interact with SQLite's POSIX locks there.
//
// flock is advisory: it keeps out writers that take the lock (the store,
// migrate up), not a program that opens the database with SQLite alone.
// On a network file system that emulates flock with POSIX locks, a second
// open in the same process is not refused.
package dblock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/securemsg/storage/store"
)

// Path returns the lock file of the database file at db: db with "-lock"
// appended, beside the file a symlink at db points to (where SQLite keeps
// the -wal and -shm), so that two paths to one file share one lock.
func Path(db string) string {
	if real, err := filepath.EvalSymlinks(db); err == nil {
		db = real
	}
	return db + "-lock"
}

// Resolve returns the path of the file that opening db opens: db with
// every symbolic link resolved, or, when nothing exists at db yet, its
// directory resolved and its name kept. A dangling symbolic link at db is
// refused with an error wrapping fs.ErrNotExist: the file created through
// it would be reached by later openers under its own name, with a lock
// file of its own.
func Resolve(db string) (string, error) {
	real, err := filepath.EvalSymlinks(db)
	if err == nil {
		return real, nil
	}
	if fi, lerr := os.Lstat(db); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
		// The caller names db: this error names where it points.
		target, _ := os.Readlink(db)
		return "", fmt.Errorf("a symbolic link to a file that does not exist, %q (%w); create the file or open it by its own name", target, fs.ErrNotExist)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(db))
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, filepath.Base(db)), nil
}

// Lock is a held writer lock.
type Lock struct {
	f *os.File
	// db is the held database file (holdFile), nil where the platform
	// has no such lock or the file did not exist yet.
	db *heldFile
}

// Acquire takes the writer lock of the database file at db without
// waiting: it creates the lock file (mode 0600) if absent and locks it;
// if the file was removed or replaced meanwhile, it locks the one now at
// the path instead (a lock on a removed file would keep nobody out).
// Where the platform allows (unix), it also holds the database file
// itself, if it exists (holdFile), so that a lock file removed or
// replaced while held lets no second writer in. Returns an error wrapping
// ErrHeld, and naming the lock file or the database file, if the lock is
// held; store.ErrSymlink if the lock file is a symbolic link; the file system's
// error if the lock file cannot be created or locked.
func Acquire(db string) (*Lock, error) {
	p := Path(db)
	for attempt := 1; ; attempt++ {
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|noFollow, 0o600)
		if err != nil {
			if isLoop(err) {
				return nil, fmt.Errorf("%s: %w", p, store.ErrSymlink)
			}
			return nil, fmt.Errorf("open lock file: %w", err)
		}
		if err := lockOrClose(f, p); err != nil {
			return nil, err
		}
		// migrate up removes a lock file it created while it still holds
		// it: a lock taken on that file after it was removed would keep
		// out nobody who opens the path now. Lock the file at the path.
		if current(f, p) {
			held, err := holdFile(strings.TrimSuffix(p, "-lock"))
			if err != nil {
				f.Close()
				return nil, err
			}
			return &Lock{f: f, db: held}, nil
		}
		f.Close()
		if attempt == maxAttempts {
			return nil, fmt.Errorf("lock %s: the lock file was replaced %d times while being locked", p, attempt)
		}
	}
}

// lockOrClose locks f, the file at name, without waiting; on failure it
// closes f and returns an error naming the file, wrapping ErrHeld if
// another open description holds the lock.
func lockOrClose(f *os.File, name string) error {
	err := lock(f)
	if err == nil {
		return nil
	}
	f.Close()
	if errors.Is(err, errWouldBlock) {
		return fmt.Errorf("%s: %w", name, ErrHeld)
	}
	return fmt.Errorf("lock %s: %w", name, err)
}

// maxAttempts bounds how often Acquire locks a lock file that was removed
// or replaced meanwhile before it gives up.
const maxAttempts = 3

// current reports whether f is still the file at path p.
func current(f *os.File, p string) bool {
	held, err := f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(p)
	return err == nil && os.SameFile(held, now)
}

// Release gives the lock up by closing the lock file (and the database
// file's descriptor it held: call it only after the database's own
// connections are closed, since closing a descriptor of the file drops
// every POSIX lock this process holds on it). Releasing a nil or
// already released Lock does nothing.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	l.db.release()
	return f.Close()
}

// File returns the descriptor of the database file that l holds (opened
// read-only), nil if it holds none (the file did not exist when the lock
// was taken, or the platform holds only the lock file). Read through it
// rather than opening the file again: closing another descriptor of the
// file would drop the POSIX locks SQLite holds on it in this process.
func (l *Lock) File() *os.File {
	if l == nil {
		return nil
	}
	return l.db.file()
}

// SetNote replaces the lock file's content with note ("" empties it)
// while l holds the lock, so that Note can tell who holds it. The lock is
// the flock alone: the note is only a hint, and a process killed while
// holding the lock leaves its note behind.
func (l *Lock) SetNote(note string) error {
	if l == nil || l.f == nil {
		return errors.New("dblock: lock not held")
	}
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("write lock note: %w", err)
	}
	if _, err := l.f.WriteAt([]byte(note), 0); err != nil {
		return fmt.Errorf("write lock note: %w", err)
	}
	return nil
}

// Note returns what the holder of the database file db's writer lock
// wrote in the lock file (SetNote), "" if nothing or if it cannot be
// read. It takes no lock.
func Note(db string) string {
	b, err := os.ReadFile(Path(db))
	if err != nil {
		return ""
	}
	return string(b)
}
