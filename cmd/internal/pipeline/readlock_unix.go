//go:build unix && !aix

package pipeline

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// SQLite's lock bytes in a database file (os.h): a connection holds a
// read lock on the shared range while it reads, and takes a write lock on
// all of it to become the exclusive writer, which a WAL connection does
// before it checkpoints and removes the -wal and -shm as the last one
// out.
const (
	sqlitePendingByte = 0x40000000
	sqliteSharedFirst = sqlitePendingByte + 2
	sqliteSharedSize  = 510
)

// lockShared takes a read lock on f's SQLite shared range, as a SQLite
// reader does, and reports false without waiting if a connection holds
// the exclusive lock. Held, it keeps every other process from becoming
// the exclusive writer: a rollback-journal writer from committing, and
// the last connection of a WAL database from removing its -wal and -shm
// when it closes, so that the -wal ReadStable found is still there when
// SQLite opens the file (SQLite creates a missing -wal of a WAL database
// even on a read-only open). The lock is the process's: closing any
// descriptor of the file (SQLite closing its connection) ends it.
func lockShared(f *os.File) (bool, error) {
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: 0, Start: sqliteSharedFirst, Len: sqliteSharedSize}
	for {
		err := unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EACCES):
			return false, nil
		case !errors.Is(err, unix.EINTR):
			return false, err
		}
	}
}
