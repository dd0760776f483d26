// The -db file: opening it read-only or creating it, and saying in plain
// words why SQLite refused it. Shared by every command that takes -db.

package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mattn/go-sqlite3"

	"github.com/securemsg/storage/internal/migration"
)

// danglingLink returns an error naming path and its target when path is a
// symbolic link to nothing, nil otherwise.
func danglingLink(path string) error {
	li, err := os.Lstat(path)
	if err != nil || li.Mode()&os.ModeSymlink == 0 {
		return nil
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	target, _ := os.Readlink(path)
	return fmt.Errorf("%s is a symbolic link to %s, which does not exist: nothing created", path, target)
}

// target returns what a command on one database starts from: the -db
// path (a usage error without it) and the migration directory embedded in
// the binary (an error wrapping schema.ErrChecksum or
// migration.ErrDirectory if it is damaged).
func (env *cmdEnv) target() (string, *migration.Migrator, error) {
	path, err := env.requireDB()
	if err != nil {
		return "", nil, err
	}
	m, err := env.migrations()
	if err != nil {
		return "", nil, err
	}
	return path, m, nil
}

// readTarget runs read on the target database (target), read read-only
// (readExisting): it fails on a missing file or one that is not a SQLite
// database. read may run more than once (pipeline.ReadStable) and must
// only read; what it returns on the last, stable run is returned.
func readTarget[T any](ctx context.Context, env *cmdEnv, read func(m *migration.Migrator, conn *sql.DB) (T, error)) (path string, m *migration.Migrator, v T, err error) {
	path, m, err = env.target()
	if err != nil {
		return "", nil, v, err
	}
	err = env.readExisting(ctx, path, func(conn *sql.DB) error {
		var rerr error
		v, rerr = read(m, conn)
		return rerr
	})
	return path, m, v, err
}

// createDSN returns the client's own DSN for the database file at path
// (immediate write transactions, busy timeout, foreign keys), creating the
// file if absent; the journal mode is left as the file has it (up switches
// a database to WAL once it has migrated). Read-only commands use
// pipeline.ReadStable instead.
func createDSN(path string) string {
	return "file:" + migration.URIPath(path) + "?mode=rwc&_txlock=immediate&_busy_timeout=5000&_foreign_keys=on"
}

// readExisting runs read on the database at path, opened read-only
// (pipeline.ReadStable: read runs again if the file changed meanwhile,
// and the command fails with pipeline.ErrChanged if it keeps changing).
// It fails rather than create a missing file, and says so when the file is
// not a SQLite database.
func (env *cmdEnv) readExisting(ctx context.Context, path string, read func(*sql.DB) error) error {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if err := danglingLink(path); err != nil {
				return err
			}
			return fmt.Errorf("%s: no such database file", path)
		}
		return err
	}
	if err := notRegular(path, fi); err != nil {
		return err
	}
	// Read permission, checked by the OS rather than guessed from the
	// mode; non-blocking, and checked again on what was opened, so that a
	// FIFO put in the file's place meanwhile fails rather than hangs.
	f, err := os.OpenFile(path, os.O_RDONLY|openNonBlocking, 0)
	if err != nil {
		return err
	}
	fi, err = f.Stat()
	f.Close()
	if err != nil {
		return err
	}
	if err := notRegular(path, fi); err != nil {
		return err
	}
	if err := notRegularSideFiles(path); err != nil {
		return err
	}
	return env.readStable(ctx, path, func(conn *sql.DB) error {
		if err := checkDatabase(ctx, conn, path); err != nil {
			return err
		}
		return read(conn)
	})
}

// notRegular returns an error naming what path is when fi (its Stat) is
// not a regular file: SQLite would block for ever opening a FIFO, and a
// directory, a device or a socket holds no database a command should
// read. nil for a regular file (a symbolic link to one included).
func notRegular(path string, fi fs.FileInfo) error {
	mode := fi.Mode()
	var what string
	switch {
	case mode.IsRegular():
		return nil
	case mode.IsDir():
		return fmt.Errorf("%s is a directory, not a database file", path)
	case mode&fs.ModeNamedPipe != 0:
		what = "a FIFO"
	case mode&fs.ModeCharDevice != 0:
		what = "a character device"
	case mode&fs.ModeDevice != 0:
		what = "a device"
	case mode&fs.ModeSocket != 0:
		what = "a socket"
	default:
		what = "not a regular file"
		return fmt.Errorf("%s is %s: a database is a regular file; nothing read", path, what)
	}
	return fmt.Errorf("%s is %s, not a regular file: a database is a regular file; nothing read", path, what)
}

// sideFiles calls check with each -journal, -wal and -shm beside the
// database file path names (beside the file a symbolic link at path
// names, where SQLite keeps them) and its Lstat, and returns the first
// error. A database that does not exist yet has its directory resolved;
// one in a directory that cannot be resolved has none beside it.
func sideFiles(path string, check func(name string, fi fs.FileInfo) error) error {
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		dir, derr := filepath.EvalSymlinks(filepath.Dir(path))
		if derr != nil {
			return nil // up says why it cannot create the file
		}
		real, err = filepath.Join(dir, filepath.Base(path)), nil
	}
	if err != nil {
		return err
	}
	for _, suffix := range []string{"-journal", "-wal", "-shm"} {
		fi, err := os.Lstat(real + suffix)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := check(real+suffix, fi); err != nil {
			return err
		}
	}
	return nil
}

// notRegularSideFiles refuses a -journal, -wal or -shm beside path that
// is not a regular file, or a symbolic link to one (notRegular): SQLite
// opens a hot journal to read it, and a FIFO planted there would block it
// for ever.
func notRegularSideFiles(path string) error {
	return sideFiles(path, func(name string, fi fs.FileInfo) error {
		if fi.Mode()&fs.ModeSymlink != 0 {
			var err error
			if fi, err = os.Stat(name); errors.Is(err, fs.ErrNotExist) {
				return nil
			} else if err != nil {
				return err
			}
		}
		return notRegular(name, fi)
	})
}

// linkedSideFiles refuses a -journal, -wal or -shm beside the database
// file path names that is a symbolic link, or a hard link (a file with
// another name too): up writes through SQLite, which would write into, or
// remove, the file it also names. The read-only commands open the -wal
// and -shm read-only and need no such check.
func linkedSideFiles(path string) error {
	return sideFiles(path, func(name string, fi fs.FileInfo) error {
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("%s is a symbolic link: SQLite would write through it; nothing changed", name)
		case links(fi) > 1:
			return fmt.Errorf("%s is a hard link (%d names): SQLite would write into the other name's file; nothing changed", name, links(fi))
		}
		return nil
	})
}

// checkDatabase reads the schema cookie, which fails on a file that is not
// a SQLite database, or once ctx is done.
func checkDatabase(ctx context.Context, conn *sql.DB, path string) error {
	var v int64
	if err := conn.QueryRowContext(ctx, "PRAGMA schema_version").Scan(&v); err != nil {
		return explainOpen(path, err)
	}
	return nil
}

// explainOpen says in plain words why SQLite refused path. An error of
// the migration directory (a file that does not replay) is returned as
// it is: it is not the database's.
func explainOpen(path string, err error) error {
	if errors.Is(err, migration.ErrDirectory) {
		return err
	}
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch {
		case se.ExtendedCode == sqlite3.ErrReadonlyRollback:
			// A hot journal, not a permission: pipeline.ReadStable says
			// so with ErrNeedsRecovery.
			return fmt.Errorf("open %s: %w", path, err)
		case se.Code == sqlite3.ErrNotADB:
			return fmt.Errorf("%s is not a SQLite database (nothing changed): %w", path, err)
		case se.Code == sqlite3.ErrReadonly:
			return fmt.Errorf("%s: permission denied, the database is read-only (nothing changed): %w", path, err)
		case se.Code == sqlite3.ErrCantOpen, se.Code == sqlite3.ErrPerm:
			return fmt.Errorf("%s: permission denied or unreadable (nothing changed): %w", path, err)
		}
	}
	return fmt.Errorf("open %s: %w", path, err)
}

// prepareCreate checks that a missing database file at path can be
// created, and says why not: a missing parent directory and a directory
// this process cannot write are different problems.
func prepareCreate(path string) error {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("cannot create %s: directory %s does not exist", path, dir)
	case err != nil:
		return fmt.Errorf("cannot create %s: %w", path, err)
	case !fi.IsDir():
		return fmt.Errorf("cannot create %s: %s is not a directory", path, dir)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("cannot create %s: permission denied in directory %s", path, dir)
		}
		return fmt.Errorf("cannot create %s: %w", path, err)
	}
	return f.Close()
}
