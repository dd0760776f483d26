package sqlitestore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/securemsg/storage/internal/dblock"
	"github.com/securemsg/storage/store"
)

// sqliteHeader starts every SQLite database file.
var sqliteHeader = []byte("SQLite format 3\x00")

// held is a database file Open holds: its resolved path and lock, and
// what Open made (the file, its lock file) to remove if it fails.
type held struct {
	real        string
	lock        *dblock.Lock
	created     bool       // the database file was created by Open
	lockCreated bool       // the lock file was created by Open
	restricted  []fileMode // the modes privateFiles changed, as they were
	// walBefore says whether a -wal lay beside the file before Open (see
	// sqliteaccess.CloseKeepingWAL).
	walBefore bool
}

// fileMode is a file's permission bits before privateFiles restricted them.
type fileMode struct {
	name string
	perm fs.FileMode
}

// undo releases the hold and removes what Open created: the database file
// (with the -wal and -shm SQLite made beside it) if Open created it, and
// the lock file if it did, so that a failed Open leaves no file behind;
// the modes privateFiles restricted are given back.
func (h held) undo() {
	h.restore()
	if h.created {
		for _, name := range []string{h.real + "-wal", h.real + "-shm", h.real + "-journal", h.real} {
			os.Remove(name)
		}
	}
	if h.lockCreated {
		// Removed while held, as migrate up does: no opener can have
		// taken a lock on it meanwhile.
		os.Remove(dblock.Path(h.real))
	}
	h.lock.Release()
}

// restore gives back the modes privateFiles restricted.
func (h held) restore() {
	for _, m := range h.restricted {
		// A file SQLite removed meanwhile (a -wal) is gone, with its mode.
		os.Chmod(m.name, m.perm)
	}
}

// checkPath refuses a path that names no file of its own: "" and
// ":memory:" (SQLite's in-memory databases), any SQLite URI ("file:" in
// any case), whose parameters could open another file, a shared
// in-memory database, or change how the file is opened, and a path
// holding a NUL byte.
func checkPath(path string) error {
	switch {
	case path == "" || path == ":memory:":
		return fmt.Errorf("%w: the store needs a database file (it runs in WAL mode and holds the file)", store.ErrInvalidArgument)
	case len(path) >= len("file:") && strings.EqualFold(path[:len("file:")], "file:"):
		return fmt.Errorf("%w: a SQLite URI is not a path: pass the file's path (the store sets how it is opened)", store.ErrInvalidArgument)
	case strings.ContainsRune(path, 0):
		return fmt.Errorf("%w: a NUL byte in the path (no file name holds one)", store.ErrInvalidArgument)
	}
	return nil
}

// holdFile resolves path to the file that will be opened (every symbolic
// link resolved, a dangling one refused), checks that it can be a
// writable database, creates it 0600 if absent, takes its writer lock
// (package internal/dblock) and restricts the modes of the file and its
// -wal and -shm (privateFiles). It returns the resolved path, which Open
// hands SQLite, the lock and what it created (held). On error nothing it created is left and no
// mode is changed; the error wraps store.ErrInUse (naming the file) if
// another open store, in this process or another, holds the file,
// store.ErrNotDatabase, fs.ErrPermission for a read-only file or directory,
// fs.ErrNotExist for a dangling symbolic link, or store.ErrSymlink.
func holdFile(path string) (held, error) {
	fail := func(err error) (held, error) { return held{}, err }
	real, err := dblock.Resolve(path)
	if err != nil {
		return fail(err)
	}
	fi, err := os.Stat(real)
	exists := err == nil
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fail(err)
	case exists && fi.IsDir():
		return fail(fmt.Errorf("%w: it is a directory", store.ErrNotDatabase))
	case exists && !fi.Mode().IsRegular():
		return fail(fmt.Errorf("%w: it is not a regular file (%s)", store.ErrNotDatabase, fi.Mode().Type()))
	case exists && readOnly(real, fi):
		return fail(fmt.Errorf("the database file is read-only: %w", fs.ErrPermission))
	}
	// SQLite creates the -wal and -shm beside the file.
	dir := filepath.Dir(real)
	if di, err := os.Stat(dir); err != nil {
		return fail(err)
	} else if readOnly(dir, di) {
		return fail(fmt.Errorf("its directory is read-only, where the store keeps its -lock, -wal and -shm files: %w", fs.ErrPermission))
	}
	created := false
	if !exists {
		// SQLite would create it 0644 under the usual umask 022, and
		// gives the -wal and -shm its mode.
		f, err := os.OpenFile(real, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		switch {
		case err == nil:
			created = true
			if err := f.Close(); err != nil {
				os.Remove(real)
				return fail(err)
			}
		case !errors.Is(err, fs.ErrExist): // created meanwhile: an opener raced us
			return fail(fmt.Errorf("create database file: %w", err))
		}
	}
	_, lerr := os.Lstat(dblock.Path(real))
	lockCreated := errors.Is(lerr, fs.ErrNotExist)
	l, err := dblock.Acquire(real)
	if errors.Is(err, dblock.ErrHeld) {
		return fail(fmt.Errorf("%w: another open store holds the database file (%v)", store.ErrInUse, err))
	}
	if err == nil {
		var restricted []fileMode
		restricted, err = checkFile(real, l)
		if err == nil {
			h := held{real: real, lock: l, created: created, lockCreated: lockCreated, restricted: restricted}
			_, werr := os.Lstat(real + "-wal")
			h.walBefore = werr == nil
			return h, nil
		}
		if lockCreated {
			// Removed while held, as migrate up does: no opener can have
			// taken a lock on it meanwhile.
			os.Remove(dblock.Path(real))
		}
		l.Release()
	}
	if created {
		os.Remove(real)
	}
	return fail(err)
}

// checkFile checks, under the lock, that the file at real is empty or a
// SQLite database (store.ErrNotDatabase otherwise), then restricts modes
// (privateFiles), returning the modes it changed.
func checkFile(real string, l *dblock.Lock) ([]fileMode, error) {
	f := l.File()
	if f == nil {
		// The platform holds no descriptor of the database: none of this
		// process's SQLite locks can be dropped by closing one here.
		var err error
		if f, err = os.Open(real); err != nil {
			return nil, err
		}
		defer f.Close()
	}
	header := make([]byte, len(sqliteHeader))
	n, err := f.ReadAt(header, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read the database header: %w", err)
	}
	if n > 0 && !bytes.Equal(header[:n], sqliteHeader) || n > 0 && n < len(header) {
		return nil, fmt.Errorf("%w: it does not start with SQLite's header", store.ErrNotDatabase)
	}
	return privateFiles(real)
}

// readOnly reports whether the file or directory at name (fi) cannot be
// written: its owner write bit is clear (which the store takes as read
// only even when running with the privilege to write it) or access says
// so.
func readOnly(name string, fi fs.FileInfo) bool {
	return fi.Mode().Perm()&0o200 == 0 || !writable(name)
}

// privateFiles removes group and other permissions from the database file
// at path and its -wal and -shm (SQLite gives those the database file's
// mode when it creates them), and refuses a -wal, -shm or -journal that
// is a symbolic or hard link (store.ErrSymlink), before SQLite would
// follow it or write into the other name's file, or not a regular file
// (store.ErrNotDatabase), before SQLite would block opening a FIFO. It
// returns the modes it changed, as they were, so that an Open that fails
// gives them back (held.undo); on error it has given them back itself.
func privateFiles(path string) (restricted []fileMode, err error) {
	defer func() {
		if err != nil {
			held{restricted: restricted}.restore()
			restricted = nil
		}
	}()
	for _, name := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		fi, err := os.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return restricted, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return restricted, fmt.Errorf("%s: %w", name, store.ErrSymlink)
		}
		if name != path && fi.Mode().IsRegular() && links(fi) > 1 {
			// Another name of the file: SQLite would write the other
			// file's bytes, and this loop change its mode.
			return restricted, fmt.Errorf("%s: %w: a hard link (%d names)", name, store.ErrSymlink, links(fi))
		}
		if !fi.Mode().IsRegular() {
			// SQLite opens a hot journal to read it: a FIFO would block
			// Open for ever.
			return restricted, fmt.Errorf("%s: %w: not a regular file (%s)", name, store.ErrNotDatabase, fi.Mode().Type())
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			if err := os.Chmod(name, perm&^0o077); err != nil {
				return restricted, fmt.Errorf("restrict database file mode: %w", err)
			}
			restricted = append(restricted, fileMode{name: name, perm: perm})
		}
	}
	return restricted, nil
}
