package pipeline

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/mattn/go-sqlite3"

	_ "github.com/securemsg/storage/cmd/internal/needcgo" // the build says why it needs cgo

	"github.com/securemsg/storage/internal/migration"
)

// readAttempts is how often ReadStable tries to read before it gives up
// with ErrChanged; readBackoff is the wait before the second attempt,
// doubled for each later one up to readBackoffMax, so that a writer's
// commit, open or close can finish. orphanSightings is how many attempts
// in a row must find one unchanged -wal without a -shm before ReadStable
// calls it ErrNeedsRecovery: an application opening or closing the
// database has the -wal alone for a moment.
const (
	readAttempts    = 10
	readBackoff     = 10 * time.Millisecond
	readBackoffMax  = 320 * time.Millisecond
	orphanSightings = 3
)

// openHook, when set by a test, runs just before SQLite opens the
// database file on a read attempt, after ReadStable recorded its state.
var openHook func()

// readOnlyDSN returns a mattn/go-sqlite3 DSN that opens the database file
// at path read-only and writes nothing, not even beside it, so that status,
// plan, drift and freeze work on a file or in a directory they cannot
// write and leave no -wal or -shm file behind.
//
// A database closed cleanly has everything in the main file: it is opened
// immutable, so SQLite takes no lock and creates no -shm (a plain mode=ro
// connection to a WAL database creates -wal and -shm, and cannot remove
// them; in a read-only directory it cannot open at all, since SQLite 3.22
// reads a WAL database read-only only through an existing -shm or as
// immutable). If a -wal or rollback journal is beside it (the database is
// open elsewhere, or was not closed cleanly), their content counts: it is
// opened mode=ro, through them, with SQLite's locks, its -shm opened
// read-only (a -wal without a -shm then fails to open rather than get
// one).
//
// Immutable means SQLite assumes the file never changes: a writer that
// checkpoints into the file while the connection reads can make it read
// stale or torn pages. ReadStable notices such a change and reads again.
func readOnlyDSN(path string, immutable bool) string {
	// readonly_shm: SQLite never opens the -shm for writing, so never
	// creates one.
	params := "?mode=ro&readonly_shm=1&_txlock=deferred&_busy_timeout=5000"
	if immutable {
		params += "&immutable=1"
	}
	return "file:" + migration.URIPath(path) + params
}

// ReadStable opens the database at path read-only (see readOnlyDSN), runs
// read on it, closes it and returns read's error. read's statements all
// run on one connection holding one read transaction, so they see one
// snapshot of the database, and a transaction read begins is a savepoint
// within it. ReadStable never creates, truncates or removes a file.
//
// Each attempt first takes a shared lock on the database file as a
// SQLite reader does (see lockShared): while it is held no other process
// can commit in rollback-journal mode, nor, as the last connection of a
// WAL database, remove the -wal and -shm on close. An attempt that finds
// the exclusive lock held, or a -wal without its -shm (an application
// opening or closing the database), waits and tries again.
//
// A database with a -wal and -shm or a -journal beside it (one an
// application has open) is read through them: the snapshot is consistent
// however often a writer commits meanwhile, and is kept unless the file
// or its -wal is replaced or its -wal or -journal comes or goes. A quiet
// database (nothing beside it) is opened immutable, which creates nothing
// but takes no lock of SQLite's, so ReadStable records the database file
// (identity, size, modification time and its 100-byte header, whose
// change counter at offset 24 every rollback-mode commit moves) and its
// -wal and -journal (identity, size, modification time) before the open
// and after the close (beside the file a symlink at path points to, where
// SQLite keeps them). A -wal or -journal that comes once the read
// transaction has begun holds later commits only (the shared lock keeps
// them out of the file until it is dropped), and the read stands. If
// the file changed meanwhile, or one came before the read transaction
// began, whatever read saw
// (or the error it met, such as SQLITE_CORRUPT from a torn page) is
// discarded and read runs again on a new connection, through the -wal if
// one is now there. After readAttempts attempts without a stable read it
// returns an error wrapping ErrChanged.
//
// read may thus run more than once: it must only read, and keep nothing
// from a previous run. ReadStable opens the database file itself for its
// lock and closes it; on POSIX systems closing any descriptor of a file
// drops the process's locks on it, so do not call ReadStable on a
// database the same process holds open through SQLite (the migrate
// command runs as a process of its own). It returns an error wrapping
// fs.ErrNotExist if path does not exist; ErrNeedsRecovery, without
// running read, if the same -wal lies beside it without a -shm on
// several attempts in a row; ErrNeedsRecovery and read's error if SQLite
// met a hot journal it may not roll back, or on every attempt could not
// begin a read through a -shm it may not write (a writer updating the
// -shm makes one attempt fail so; the next succeeds); and ctx's error if
// ctx ends while it waits to retry.
func ReadStable(ctx context.Context, path string, read func(*sql.DB) error) error {
	// SQLite keeps the -wal and -journal beside the file a symlink points
	// to: the state is recorded there, and that file is opened.
	path, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	wait := readBackoff
	var (
		orphan    stamp // the -wal last found without a -shm
		sightings int
		why       string // what upset the last attempt
		whys      = map[string]bool{}
	)
	for attempt := 1; ; attempt++ {
		done, err := readAttempt(path, read, &orphan, &sightings, &why)
		if done {
			return err
		}
		whys[why] = true
		if attempt == readAttempts {
			if err != nil {
				return err
			}
			if len(whys) > 1 {
				return fmt.Errorf("%w: %s: %s on the last of %d attempts, each upset", ErrChanged, path, why, readAttempts)
			}
			return fmt.Errorf("%w: %s: %s on each of %d attempts", ErrChanged, path, why, readAttempts)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, readBackoffMax)
	}
}

// readAttempt is one attempt of ReadStable: done is false when it must
// try again, why then saying what upset it, and err, if not nil, being
// what ReadStable returns should no later attempt succeed.
func readAttempt(path string, read func(*sql.DB) error, orphan *stamp, sightings *int, why *string) (done bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return true, fmt.Errorf("pipeline: %w", err)
	}
	// f holds the shared lock until SQLite has closed the file (which
	// drops it), and is how the file is recorded: opening and closing
	// another descriptor of it would drop the lock early.
	defer f.Close()
	held, err := lockShared(f)
	if err != nil {
		return true, fmt.Errorf("pipeline: lock %s: %w", path, err)
	}
	if !held {
		*why = "a writer held it exclusively"
		return false, nil
	}
	before, err := stateOf(f, path)
	if err != nil {
		return true, fmt.Errorf("pipeline: %w", err)
	}
	if before.wal.fi != nil && !before.shm {
		if orphan.fi != nil && orphan.equal(before.wal) {
			*sightings++
		} else {
			*orphan, *sightings = before.wal, 1
		}
		if *sightings >= orphanSightings {
			return true, fmt.Errorf("%w: %s-wal has no -shm beside it", ErrNeedsRecovery, path)
		}
		*why = "its -wal had no -shm beside it (an application opening or closing it)"
		return false, nil
	}
	*orphan, *sightings = stamp{}, 0
	immutable := before.immutable()
	var came atomic.Bool
	readErr := readOnce(path, immutable, before.wal.fi != nil, &came, read)
	after, err := stateOf(f, path)
	if err != nil {
		return true, fmt.Errorf("pipeline: %w", err)
	}
	if !after.stableFor(before, immutable) {
		*why = "it changed during the read"
		return false, nil
	}
	if came.Load() {
		*why = "a -wal or -journal came beside it while it opened"
		return false, nil
	}
	var se sqlite3.Error
	if errors.As(readErr, &se) {
		switch se.ExtendedCode {
		case sqlite3.ErrReadonlyRollback:
			return true, fmt.Errorf("%w: %s-journal is a hot journal: %w", ErrNeedsRecovery, path, readErr)
		case sqlite3.ErrReadonlyRecovery, errReadonlyCantInit:
			// A connection that may not write the -shm cannot repair its
			// header nor claim a read mark: SQLite gives up where a
			// read-write reader would retry or write. A writer caught
			// mid-commit has both right a moment later; if none does, the
			// -shm needs the repair only a read-write open makes.
			*why = "SQLite could not begin a read through the -shm (a writer was updating it)"
			return false, fmt.Errorf("%w: %s-shm cannot be read without writing: %w", ErrNeedsRecovery, path, readErr)
		}
	}
	return true, readErr
}

// errReadonlyCantInit is SQLITE_READONLY_CANTINIT, which mattn/go-sqlite3
// does not name: a read-only -shm reader found no read mark it may use.
var errReadonlyCantInit = sqlite3.ErrReadonly.Extend(5)

// readOnce runs read on a new read-only connection pool of one connection
// that holds one read transaction (snapshotConnector), closed before it
// returns so that no read can happen after the state is recorded again.
func readOnce(path string, immutable, throughWAL bool, came *atomic.Bool, read func(*sql.DB) error) error {
	c := snapshotConnector{dsn: readOnlyDSN(path, immutable)}
	if throughWAL {
		c.wal = path + "-wal"
	}
	if immutable {
		c.quiet, c.came = path, came
	}
	conn := sql.OpenDB(c)
	conn.SetMaxOpenConns(1)
	conn.SetMaxIdleConns(1)
	err := read(conn)
	if cerr := conn.Close(); err == nil {
		err = cerr
	}
	return err
}

// fileState is what ReadStable compares before and after a read.
type fileState struct {
	main, wal, journal stamp
	header             []byte // the first 100 bytes of the database file
	// shm says whether a -shm is beside the file. It is not compared:
	// every reader and writer of a WAL database writes to it.
	shm bool
}

// stamp is one file's identity, size and modification time; the zero
// stamp is a missing file.
type stamp struct {
	fi os.FileInfo
}

func stampOf(path string) (stamp, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return stamp{}, nil
	}
	return stamp{fi: fi}, err
}

// same reports whether s and o are one file, or both missing.
func (s stamp) same(o stamp) bool {
	if s.fi == nil || o.fi == nil {
		return s.fi == nil && o.fi == nil
	}
	return os.SameFile(s.fi, o.fi)
}

// equal reports whether s and o are one file, of one size and
// modification time, or both missing.
func (s stamp) equal(o stamp) bool {
	if s.fi == nil || o.fi == nil {
		return s.fi == nil && o.fi == nil
	}
	return os.SameFile(s.fi, o.fi) && s.fi.Size() == o.fi.Size() && s.fi.ModTime().Equal(o.fi.ModTime())
}

// stateOf records the database file f (at path) and what lies beside it.
func stateOf(f *os.File, path string) (fileState, error) {
	var st fileState
	fi, err := f.Stat()
	if err != nil {
		return st, err
	}
	st.main = stamp{fi: fi}
	hdr := make([]byte, 100)
	n, err := f.ReadAt(hdr, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return st, err
	}
	st.header = hdr[:n]
	if st.wal, err = stampOf(path + "-wal"); err != nil {
		return st, err
	}
	if st.journal, err = stampOf(path + "-journal"); err != nil {
		return st, err
	}
	st.shm = exists(path + "-shm")
	return st, nil
}

// immutable reports whether the database is opened immutable: nothing
// beside it holds content of its own.
func (s fileState) immutable() bool { return s.wal.fi == nil && s.journal.fi == nil }

// stableFor reports whether what was read on a connection opened with
// before's state is valid now that the files are in state s. An immutable
// connection takes no lock of SQLite's and assumes nothing changes: any
// change to the file (a checkpoint into it) may have made it read stale
// or torn pages. A -wal or -journal that came after its read transaction
// began (Connect refuses one that was there by then) holds commits later
// than what it read, which the unchanged file still holds consistently:
// an application that opens the database and writes while the read runs
// does not upset it. A connection
// through the -wal or journal reads one snapshot in its read
// transaction, whatever a writer appends or checkpoints meanwhile: only
// the file or its -wal being replaced by another (not the same file
// grown), or a -wal or journal coming or going (the connection may then
// have opened the file in another mode), counts.
func (s fileState) stableFor(before fileState, immutable bool) bool {
	if immutable {
		return s.main.equal(before.main) && bytes.Equal(s.header, before.header)
	}
	return os.SameFile(s.main.fi, before.main.fi) && s.wal.same(before.wal) &&
		(s.journal.fi == nil) == (before.journal.fi == nil)
}

// CopyTo writes a copy of the database behind conn, a connection read
// runs on in ReadStable, to a new file at dst, through SQLite's backup
// API: the copy is of the snapshot read sees, -wal content included, and
// nothing is written to the source. (VACUUM INTO cannot run inside the
// read transaction ReadStable holds.) It returns an error if conn is not
// one of ReadStable's, dst exists or cannot be written, or SQLite fails.
func CopyTo(ctx context.Context, conn *sql.DB, dst string) error {
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("pipeline: copy to %s: %w", dst, fs.ErrExist)
	}
	c, err := conn.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Raw(func(dc any) error {
		src, ok := dc.(*snapshotConn)
		if !ok {
			return errors.New("pipeline: CopyTo needs a connection of ReadStable")
		}
		d, err := snapshotDriver.Open("file:" + migration.URIPath(dst) + "?mode=rwc")
		if err != nil {
			return fmt.Errorf("pipeline: copy to %s: %w", dst, err)
		}
		dconn := d.(*sqlite3.SQLiteConn)
		defer dconn.Close()
		b, err := dconn.Backup("main", src.SQLiteConn, "main")
		if err != nil {
			return fmt.Errorf("pipeline: copy to %s: %w", dst, err)
		}
		if _, err := b.Step(-1); err != nil {
			b.Finish()
			return fmt.Errorf("pipeline: copy to %s: %w", dst, err)
		}
		if err := b.Finish(); err != nil {
			return fmt.Errorf("pipeline: copy to %s: %w", dst, err)
		}
		return dconn.Close()
	})
}

// snapshotConnector opens connections to dsn that hold a read
// transaction from the moment they connect until they close: every
// statement run on one reads the same snapshot of the database, however
// often a writer commits meanwhile (a WAL reader keeps its snapshot; in
// rollback mode the shared lock keeps writers out). A transaction begun
// on one (Status and Drift begin theirs) is a savepoint inside it. It
// registers no driver.
type snapshotConnector struct {
	dsn string
	// wal, if set, is the -wal the connection reads through: if it is
	// gone (the application closed the database since ReadStable looked),
	// Connect fails rather than open the file, which would create an
	// empty -wal beside a database that is now quiet. ReadStable then
	// sees the change and reads again, immutable.
	wal string
	// quiet, if set, is the database file of an immutable connection:
	// if a -wal or -journal lies beside it once the connection's read
	// transaction has begun, SQLite may have opened it and read through
	// it without any of its locks, so Connect fails (errQuietGone) and
	// ReadStable reads again. None found then means none was there when
	// the transaction began: ReadStable's shared lock keeps SQLite from
	// removing one.
	quiet string
	// came is set when Connect refused a connection so.
	came *atomic.Bool
}

// snapshotSavepoint names the savepoint of a transaction begun on a
// snapshot connection.
const snapshotSavepoint = "pipeline_snapshot"

func (c snapshotConnector) Connect(ctx context.Context) (driver.Conn, error) {
	if c.wal != "" && !exists(c.wal) {
		return nil, errWALGone
	}
	if openHook != nil {
		openHook()
	}
	dc, err := snapshotDriver.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	sc := dc.(*sqlite3.SQLiteConn)
	// BEGIN is deferred: the read of sqlite_master starts the read
	// transaction, and fails here on a file that is not a database.
	if _, err := sc.ExecContext(ctx, "BEGIN", nil); err != nil {
		sc.Close()
		return nil, err
	}
	if _, err := sc.ExecContext(ctx, "SELECT count(*) FROM sqlite_master", nil); err != nil {
		sc.Close()
		return nil, err
	}
	if c.quiet != "" && (exists(c.quiet+"-wal") || exists(c.quiet+"-journal")) {
		sc.Close()
		c.came.Store(true)
		return nil, errQuietGone
	}
	return &snapshotConn{SQLiteConn: sc}, nil
}

func (c snapshotConnector) Driver() driver.Driver { return snapshotDriver }

var snapshotDriver = &sqlite3.SQLiteDriver{}

// snapshotConn is a connection holding its read transaction; closing it
// ends the transaction.
type snapshotConn struct{ *sqlite3.SQLiteConn }

func (c *snapshotConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *snapshotConn) BeginTx(ctx context.Context, _ driver.TxOptions) (driver.Tx, error) {
	if _, err := c.ExecContext(ctx, "SAVEPOINT "+snapshotSavepoint, nil); err != nil {
		return nil, err
	}
	return savepointTx{c}, nil
}

// savepointTx is a transaction begun on a snapshotConn.
type savepointTx struct{ c *snapshotConn }

func (t savepointTx) Commit() error {
	_, err := t.c.ExecContext(context.Background(), "RELEASE "+snapshotSavepoint, nil)
	return err
}

func (t savepointTx) Rollback() error {
	_, err := t.c.ExecContext(context.Background(), "ROLLBACK TO "+snapshotSavepoint+"; RELEASE "+snapshotSavepoint, nil)
	return err
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
