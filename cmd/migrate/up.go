package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/securemsg/storage/cmd/internal/pipeline"
	"github.com/securemsg/storage/internal/dblock"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/schema"
)

// newUpDoc returns up's document for database db, before anything is read.
func newUpDoc(db string) *upDoc {
	return &upDoc{docHeader: docHeader{Command: "up", DB: db}, Applied: []string{},
		verifyFields: verifyFields{Differences: []pipeline.Difference{}, History: []pipeline.HistoryDrift{}}}
}

// upDoc is up's JSON document.
type upDoc struct {
	docHeader        // command "up"
	Created   bool   `json:"created"` // up created the file
	Current   string `json:"current"` // the version found ("" for an empty database)
	// Applied lists the versions up applied, oldest first.
	Applied []string `json:"applied"`
	verifyFields
}

func cmdUp(ctx context.Context, env *cmdEnv) (err error) {
	doc := newUpDoc(env.db)
	env.doc = doc
	defer func() { doc.report(env.text(), err, &doc.Current) }()
	path, m, err := env.target()
	if err != nil {
		return err
	}
	w := env.text()
	fi, statErr := os.Stat(path)
	switch {
	case statErr == nil && !fi.Mode().IsRegular():
		return notRegular(path, fi)
	case statErr == nil:
		if err := notRegularSideFiles(path); err != nil {
			return err
		}
		if err := linkedSideFiles(path); err != nil {
			return err
		}
	case statErr != nil && !errors.Is(statErr, fs.ErrNotExist):
		return statErr
	case statErr != nil:
		if err := danglingLink(path); err != nil {
			return err
		}
		if err := linkedSideFiles(path); err != nil {
			return err
		}
	}
	created := statErr != nil
	// Nothing to do is success, without a write: a database at head is
	// checked through a read-only open first, so a read-only file or
	// directory at head passes. verified is set once that check has
	// verified the database (verifyBeforeUp) under up's lock: one at head
	// but not yet in WAL mode is not verified a second time.
	verified := false
	upToDate := func() (bool, error) {
		if created || fi.Size() == 0 {
			return false, nil
		}
		current, wal, err := atHead(ctx, env, m, path)
		if errors.Is(err, pipeline.ErrNeedsRecovery) {
			// The read-write open recovers it; verified there.
			return false, nil
		}
		if err != nil || current == "" {
			return false, err
		}
		verified = true
		if !wal {
			return false, nil // up switches it to WAL
		}
		doc.Current = current
		fmt.Fprintf(w, "already at version %s\n", m.Head())
		return true, nil
	}
	if created {
		if err := prepareCreate(path); err != nil {
			return err
		}
		doc.Created = true
		fmt.Fprintf(w, "creating new database %s\n", path)
	} else if fi.Size() == 0 {
		fmt.Fprintf(w, "%s is an empty file: creating the database in it\n", path)
	}

	// up writes: it holds the database file's writer lock, as an open
	// store does, and refuses a file an application has open.
	lockPath := dblock.Path(path)
	_, lockErr := os.Stat(lockPath)
	lockCreated := errors.Is(lockErr, fs.ErrNotExist)
	lock, err := acquireUpLock(ctx, path, env.lockTimeout)
	if errors.Is(err, dblock.ErrHeld) {
		// Nothing to apply needs no lock: a database at head beside a
		// live store is success, read read-only.
		if done, uerr := upToDate(); uerr != nil || done {
			return uerr
		}
		// Otherwise the holder's file it is, even if up created it a
		// moment ago.
		return heldError(path, err, env.lockTimeout)
	}
	if err != nil {
		if created {
			os.Remove(path)
		} else if done, uerr := upToDate(); uerr != nil || done {
			// The lock file cannot be made (a read-only directory), but
			// there is nothing to write.
			return uerr
		}
		return err
	}
	// SQLite keeps the -wal beside the file a symlink names.
	real, rerr := filepath.EvalSymlinks(path)
	_, werr := os.Lstat(real + "-wal")
	walBefore := rerr == nil && werr == nil
	conn, err := sql.Open("sqlite3", createDSN(path))
	if err != nil {
		lock.Release()
		return err
	}
	defer func() {
		if err != nil && walBefore && !created {
			// A refused file and its -wal stay as they were found.
			sqliteaccess.CloseKeepingWAL(conn, "sqlite3", real)
		} else if cerr := conn.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close %s: %w", path, cerr)
		}
		if err != nil && created {
			// The file did not exist before: leave none behind.
			for _, suffix := range []string{"", "-journal", "-wal", "-shm"} {
				os.Remove(path + suffix)
			}
		}
		if lockCreated {
			// up leaves nothing of its own beside the database. Removed
			// while still held, after the last write: an opener that found
			// the file before is refused, one that comes after makes a new
			// one.
			os.Remove(lockPath)
		} else {
			lock.SetNote("")
		}
		lock.Release()
	}()
	if done, err := upToDate(); err != nil || done {
		return err
	}
	if err := checkDatabase(ctx, conn, path); err != nil {
		return err
	}
	if !verified {
		if err := verifyBeforeUp(ctx, env, m, conn, path); err != nil {
			doc.Current = newerCurrent(ctx, m, conn, err)
			return err
		}
	}
	st, err := m.Status(ctx, conn)
	if err != nil {
		doc.Current = newerCurrent(ctx, m, conn, err)
		return err
	}
	doc.Current = st.Current

	applied, err := m.Up(ctx, conn)
	if err != nil {
		var se sqlite3.Error
		if errors.As(err, &se) && se.Code == sqlite3.ErrReadonly {
			return explainOpen(path, err)
		}
		return err
	}
	// The client runs its database in WAL mode. Set only now, so that a
	// refused database is left exactly as it was found.
	if _, err := conn.ExecContext(ctx, "PRAGMA journal_mode = WAL"); err != nil {
		return fmt.Errorf("set WAL journal mode: %w", err)
	}
	doc.Applied = nonNil(applied)
	if len(applied) == 0 {
		fmt.Fprintf(w, "already at version %s\n", m.Head())
		return nil
	}
	fmt.Fprintf(w, "applied: %s\n", strings.Join(applied, " "))
	fmt.Fprintf(w, "now at version %s\n", m.Head())
	return nil
}

// upLockNote is what up writes in the lock file while it holds the
// writer lock (dblock.Lock.SetNote), with its process id, so that a
// second up can tell it from an application.
const upLockNote = "migrate up pid %d\n"

// acquireUpLock takes the writer lock of the database file at path,
// waiting up to timeout while another writer holds it, and notes up as
// its holder. It returns an error wrapping dblock.ErrHeld if the lock is
// still held when timeout has passed (at once for 0).
func acquireUpLock(ctx context.Context, path string, timeout time.Duration) (*dblock.Lock, error) {
	deadline := time.Now().Add(timeout)
	for {
		lock, err := dblock.Acquire(path)
		if err == nil {
			if err := lock.SetNote(fmt.Sprintf(upLockNote, os.Getpid())); err != nil {
				lock.Release()
				return nil, err
			}
			return lock, nil
		}
		left := time.Until(deadline)
		if !errors.Is(err, dblock.ErrHeld) || left <= 0 {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(left, 50*time.Millisecond)):
		}
	}
}

// heldError says who holds the writer lock of the database file at path
// that up could not take (err wraps dblock.ErrHeld): another up, if the
// lock file names a running one, otherwise an application.
func heldError(path string, err error, waited time.Duration) error {
	after := ""
	if waited > 0 {
		after = fmt.Sprintf(" after waiting %s", waited)
	}
	var pid int
	if _, serr := fmt.Sscanf(dblock.Note(path), upLockNote, &pid); serr == nil && running(pid) {
		return fmt.Errorf("another migrate up (pid %d) holds the writer lock of %s (%w)%s: nothing changed; run up again when it is done, or wait with -lock-timeout", pid, path, err, after)
	}
	return fmt.Errorf("%s is open in an application (%w)%s: close it and run up again, or wait with -lock-timeout; nothing changed", path, err, after)
}

// running reports whether a process with id pid exists (false where
// signals cannot tell).
func running(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	return p.Signal(syscall.Signal(0)) == nil
}

// atHead reads the database at path read-only (readExisting) and returns
// its version when it is at m's head with no out-of-order file and no
// drift from what its history says (verifyBeforeUp, whose finding it
// returns), and whether it is in WAL mode: up has nothing to do when it
// is. It returns "" when up has migrations to run.
func atHead(ctx context.Context, env *cmdEnv, m *migration.Migrator, path string) (current string, wal bool, err error) {
	err = env.readExisting(ctx, path, func(conn *sql.DB) error {
		current = ""
		st, err := m.Status(ctx, conn)
		if err != nil || st.Current != m.Head() || len(st.Pending) > 0 || len(st.OutOfOrder) > 0 {
			return nil // up places the database and says why it cannot
		}
		if err := verifyBeforeUp(ctx, env, m, conn, path); err != nil {
			return err
		}
		current = st.Current
		return nil
	})
	if err != nil || current == "" {
		return "", false, err
	}
	// The header's read and write versions are 2 in WAL mode.
	f, err := os.Open(path)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	var header [20]byte
	if _, err := io.ReadFull(f, header[:]); err != nil || header[18] != 2 || header[19] != 2 {
		return current, false, nil
	}
	return current, true, nil
}

// newerCurrent returns, when err says the database on conn is newer than
// m (schema.ErrNewerDatabase), the newest version its history records, as
// m.Status reports it with that error; otherwise "". A refused newer
// database's document names the release that wrote it.
func newerCurrent(ctx context.Context, m *migration.Migrator, conn *sql.DB, err error) string {
	if !errors.Is(err, schema.ErrNewerDatabase) {
		return ""
	}
	st, _ := m.Status(ctx, conn)
	return st.Current
}

// refuseObjects refuses, as a finding, a database holding schema objects
// no migration defines (objs), or defined ones missing or defined
// otherwise (changed): the check sqlitestore.Open makes
// (objectDifferences), each printed on stdout; nothing is changed.
func refuseObjects(env *cmdEnv, path string, objs []migration.Object, changed []migration.Difference) error {
	if len(objs)+len(changed) == 0 {
		return nil
	}
	w := env.text()
	if len(objs) > 0 {
		fmt.Fprintf(w, "-- %s holds %d schema object(s) no migration defines (the store refuses to open it): nothing applied\n", path, len(objs))
		for _, o := range objs {
			fmt.Fprintf(w, "-- %s\n", escapeText(rawObject(o)))
		}
		return findingf("%s holds %d schema object(s) no migration defines; nothing applied", path, len(objs))
	}
	fmt.Fprintf(w, "-- %s holds %d defined schema object(s) missing or defined otherwise (the store refuses to open it): nothing applied\n", path, len(changed))
	for _, c := range changed {
		fmt.Fprintf(w, "-- %s\n", escapeText(c.String()))
	}
	return findingf("%s holds %d defined schema object(s) missing or defined otherwise; nothing applied", path, len(changed))
}

// verifyBeforeUp refuses, as a finding, a database holding schema objects
// no migration defines (refuseObjects) or whose schema or history
// is not what its history says (pipeline.Verify; a *refusal): up would
// build on a schema it does not know, or adopt a legacy baseline that is
// not the version-14 schema. Nothing is changed. up and plan both run it,
// so that they agree.
func verifyBeforeUp(ctx context.Context, env *cmdEnv, m *migration.Migrator, conn *sql.DB, path string) error {
	d, err := pipeline.Verify(ctx, m, conn)
	if err != nil {
		var se sqlite3.Error
		if errors.As(err, &se) {
			return explainOpen(path, err)
		}
		return err
	}
	objs, changed, err := objectDifferences(ctx, m, conn)
	if err != nil {
		var se sqlite3.Error
		if errors.As(err, &se) {
			return explainOpen(path, err)
		}
		return err
	}
	if err := refuseObjects(env, path, objs, nil); err != nil {
		return err
	}
	if d.Empty() {
		// What Atlas's inspection does not see (a collation, a generated
		// column, a partial index's WHERE) the definitions check does.
		return refuseObjects(env, path, nil, changed)
	}
	st, err := m.Status(ctx, conn)
	if err != nil {
		return err
	}
	return &refusal{
		finding: finding{msg: fmt.Sprintf("%s is not what its history says (version %s): %d schema difference(s), %d history row(s); up refuses it, nothing applied",
			path, st.Current, schemaDifferences(d), len(d.History))},
		path: path, current: st.Current, d: d,
	}
}

// schemaDifferences counts d's schema differences, not the statements
// that would fix them (a table rebuild is several).
func schemaDifferences(d pipeline.Differences) int {
	if len(d.Found) == 0 && len(d.Schema) > 0 {
		return 1
	}
	return len(d.Found)
}

// refusal is verifyBeforeUp's finding: the database at path, at version
// current by its history, differs from what that history says by d.
type refusal struct {
	finding
	path, current string
	d             pipeline.Differences
}

func (r *refusal) Unwrap() error { return &r.finding }

// verifyFields are the differences verifyBeforeUp found, in up's and
// plan's JSON documents (empty when it found none).
type verifyFields struct {
	// Differences lists each schema difference from what the database's
	// history says, in words.
	Differences []pipeline.Difference `json:"differences"`
	// History lists the schema_revision rows that disagree with the
	// migration directory.
	History []pipeline.HistoryDrift `json:"history"`
}

// report fills v, and *current with the version found, from a refusal in
// err, and prints its differences on w, one a line; without a refusal it
// does nothing.
func (v *verifyFields) report(w io.Writer, err error, current *string) {
	var r *refusal
	if !errors.As(err, &r) {
		return
	}
	*current = r.current
	v.Differences, v.History = nonNil(r.d.Found), nonNil(r.d.History)
	fmt.Fprintf(w, "-- %s is not what its history says it is (version %s): up refuses it, nothing applied\n", r.path, escapeText(r.current))
	for _, f := range r.d.Found {
		fmt.Fprintf(w, "-- %s\n", escapeText(strings.Replace(f.String(), "at head", "at version "+r.current, 1)))
	}
	if len(r.d.Found) == 0 && len(r.d.Schema) > 0 {
		fmt.Fprintf(w, "-- the schema differs (run drift for the SQL)\n")
	}
	for _, h := range r.d.History {
		fmt.Fprintf(w, "-- %s\n", escapeText(h.String()))
	}
}
