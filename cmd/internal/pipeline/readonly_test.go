package pipeline_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/cmd/internal/pipeline"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/testkit/migrationtest"
)

// closedDB creates a database file with table t holding rows 1..3 in the
// given journal mode and closes it cleanly: nothing is left beside it.
func closedDB(t *testing.T, journal string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "client.db")
	conn, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode="+journal)
	require.NoError(t, err)
	exec(t, conn, "CREATE TABLE t (x INTEGER)", "INSERT INTO t VALUES (1), (2), (3)")
	require.NoError(t, conn.Close())
	require.Equal(t, []string{"client.db"}, dirNames(t, filepath.Dir(path)))
	return path
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// write commits stmt from a read-write connection of its own; with keep
// the connection stays open until the test ends (a WAL database then
// keeps its -wal), otherwise it is closed (the WAL is checkpointed into
// the file and removed).
func write(t *testing.T, path string, keep bool, stmt string) {
	t.Helper()
	conn, err := sql.Open("sqlite3", "file:"+path+"?mode=rw&_busy_timeout=5000")
	require.NoError(t, err)
	conn.SetMaxOpenConns(1)
	exec(t, conn, stmt)
	if keep {
		t.Cleanup(func() { conn.Close() })
		return
	}
	require.NoError(t, conn.Close())
}

func count(conn *sql.DB) (int, error) {
	var n int
	err := conn.QueryRow("SELECT count(*) FROM t").Scan(&n)
	return n, err
}

// TestReadStable has a writer commit between ReadStable's open (the first
// query of read) and read's own query. An immutable connection would
// report the old rows (or fail on a torn page) as if nothing happened:
// ReadStable notices the change and reads again, or fails with ErrChanged.
func TestReadStable(t *testing.T) {
	ctx := context.Background()
	errRead := errors.New("read failed")
	tests := []struct {
		name    string
		journal string
		keep    bool // the writer stays open
		writes  int  // attempts on which the writer commits
		readErr int  // attempts on which read fails after its query
		insert  bool // the writer inserts a row rather than deleting one
		runs    int  // how often read runs
		want    int  // the rows ReadStable's caller gets
		wantErr error
	}{
		{name: "no writer", journal: "WAL", runs: 1, want: 3},
		// The commit went to a -wal that came after the read began, the
		// file unchanged: the read is the snapshot before it, as a read
		// through the -wal begun then would be, and is kept.
		{name: "WAL, writer stays open", journal: "WAL", keep: true, writes: 1, runs: 1, want: 3},
		// The writer's close rewrites the file under the immutable
		// connection: its read may be fresh, stale or torn.
		{name: "WAL, writer closes", journal: "WAL", writes: 1, runs: 2, want: 2},
		{name: "rollback journal, writer closes", journal: "DELETE", writes: 1, runs: 2, want: 2},
		{name: "rollback journal, writer stays open", journal: "DELETE", keep: true, writes: 1, runs: 2, want: 2},
		{name: "a writer on three attempts", journal: "WAL", writes: 3, runs: 4, want: 0},
		{name: "a writer on every attempt", journal: "WAL", writes: pipeline.ReadAttempts, insert: true, runs: pipeline.ReadAttempts, wantErr: pipeline.ErrChanged},
		{name: "read fails, nothing changed", journal: "WAL", readErr: 1, runs: 1, wantErr: errRead},
		{name: "read fails while the file changed", journal: "WAL", writes: 1, readErr: 1, runs: 2, want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := closedDB(t, tt.journal)
			attempt, got := 0, 0
			err := pipeline.ReadStable(ctx, path, func(conn *sql.DB) error {
				attempt++
				var v int
				require.NoError(t, conn.QueryRow("PRAGMA schema_version").Scan(&v), "the open")
				if attempt <= tt.writes {
					stmt := "DELETE FROM t WHERE x = (SELECT max(x) FROM t)"
					if tt.insert {
						stmt = "INSERT INTO t VALUES (9)"
					}
					write(t, path, tt.keep, stmt)
				}
				n, err := count(conn)
				if err != nil {
					return err
				}
				got = n
				if attempt <= tt.readErr {
					return errRead
				}
				return nil
			})
			require.Equal(t, tt.runs, attempt, "read runs")
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got, "what the caller reports is the database as it is")
		})
	}
}

// TestReadStableCreatesNothing reads a cleanly closed WAL database in a
// read-only directory: nothing appears beside it.
func TestReadStableCreatesNothing(t *testing.T) {
	path := closedDB(t, "WAL")
	dir := filepath.Dir(path)
	require.NoError(t, os.Chmod(dir, 0o555))
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	var n int
	err := pipeline.ReadStable(context.Background(), path, func(conn *sql.DB) error {
		var err error
		n, err = count(conn)
		require.Equal(t, []string{"client.db"}, dirNames(t, dir), "while open")
		return err
	})
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, []string{"client.db"}, dirNames(t, dir))

	err = pipeline.ReadStable(context.Background(), filepath.Join(dir, "missing.db"), func(*sql.DB) error {
		t.Fatal("read ran on a missing file")
		return nil
	})
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func TestReadStableStopsWithContext(t *testing.T) {
	path := closedDB(t, "WAL")
	ctx, cancel := context.WithCancel(context.Background())
	attempts := 0
	err := pipeline.ReadStable(ctx, path, func(conn *sql.DB) error {
		attempts++
		_, err := count(conn)
		write(t, path, false, "INSERT INTO t VALUES (9)")
		cancel()
		return err
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, attempts)
}

// TestReadStableNeedsRecovery reads files a read-write open would have to
// recover: ReadStable creates nothing beside them, changes nothing and
// says so with ErrNeedsRecovery. A -wal with its -shm, as a crash leaves
// them, is still read through the -wal.
func TestReadStableNeedsRecovery(t *testing.T) {
	tests := []struct {
		name    string
		journal string
		setup   []string // statements of the writer that stays open
		copy    []string // what is copied beside the database
		runs    int
		want    int
		wantErr error
	}{
		{name: "-wal without -shm", journal: "WAL", setup: []string{"PRAGMA wal_autocheckpoint = 0", "INSERT INTO t VALUES (4)"},
			copy: []string{"-wal"}, wantErr: pipeline.ErrNeedsRecovery},
		{name: "hot journal", journal: "DELETE",
			setup: []string{"PRAGMA cache_size = 1", "BEGIN", "DELETE FROM t",
				"WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 20000) INSERT INTO t SELECT x FROM n"},
			copy: []string{"-journal"}, runs: 1, wantErr: pipeline.ErrNeedsRecovery},
		{name: "-wal and -shm left by a crash", journal: "WAL", setup: []string{"PRAGMA wal_autocheckpoint = 0", "INSERT INTO t VALUES (4)"},
			copy: []string{"-wal", "-shm"}, runs: 1, want: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := closedDB(t, tt.journal)
			conn, err := sql.Open("sqlite3", "file:"+src+"?mode=rw")
			require.NoError(t, err)
			conn.SetMaxOpenConns(1)
			defer conn.Close()
			exec(t, conn, tt.setup...)
			path := crashCopy(t, src, tt.copy...)
			dir := filepath.Dir(path)
			names := dirNames(t, dir)
			before, err := os.ReadFile(path)
			require.NoError(t, err)

			runs, got := 0, 0
			readErr := pipeline.ReadStable(context.Background(), path, func(conn *sql.DB) error {
				runs++
				n, err := count(conn)
				got = n
				return err
			})
			require.Equal(t, tt.runs, runs, "read runs")
			require.Equal(t, names, dirNames(t, dir), "nothing created or removed beside the file")
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, before, after, "the file is unchanged")
			if tt.wantErr != nil {
				require.ErrorIs(t, readErr, tt.wantErr)
				return
			}
			require.NoError(t, readErr)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestReadStableThroughSymlink reads a WAL database through a symlink
// while a writer holds it open with a commit only in its -wal, which
// SQLite keeps beside the link's target: the commit is seen, as through
// the real path, and a writer committing during the read does not upset
// it: the read is of one snapshot, taken when it opened.
func TestReadStableThroughSymlink(t *testing.T) {
	path := closedDB(t, "WAL")
	link := filepath.Join(t.TempDir(), "link.db")
	require.NoError(t, os.Symlink(path, link))
	write(t, path, true, "PRAGMA wal_autocheckpoint = 0; INSERT INTO t VALUES (4)")
	require.FileExists(t, path+"-wal")

	runs, got := 0, 0
	err := pipeline.ReadStable(context.Background(), link, func(conn *sql.DB) error {
		runs++
		var v int
		require.NoError(t, conn.QueryRow("PRAGMA schema_version").Scan(&v), "the open")
		if runs == 1 {
			write(t, path, true, "INSERT INTO t VALUES (5)")
		}
		n, err := count(conn)
		got = n
		return err
	})
	require.NoError(t, err)
	require.Equal(t, 1, runs, "a read through the -wal is of one snapshot")
	require.Equal(t, 4, got, "the rows committed to the -wal before the open are seen, the later commit is not")
	require.Equal(t, []string{"link.db"}, dirNames(t, filepath.Dir(link)), "nothing created beside the link")
}

// headFile creates a database file migrated to head, in WAL mode as the
// client runs it, and closes it cleanly.
func headFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "client.db")
	conn, err := sql.Open("sqlite3", "file:"+path+"?_txlock=immediate&_foreign_keys=on&_journal_mode=WAL")
	require.NoError(t, err)
	_, err = mustDefault(t).Up(context.Background(), conn)
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	return path
}

// fileBytes returns the content of every file in dir by name.
func fileBytes(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range dirNames(t, dir) {
		b, err := os.ReadFile(filepath.Join(dir, n))
		require.NoError(t, err)
		out[n] = string(b)
	}
	return out
}

// driftOf is what the migrate drift command reads, checked for a
// consistent snapshot: the row count read before the drift check and
// after it are the same.
func driftOf(ctx context.Context, m *migration.Migrator) func(*sql.DB) error {
	return func(conn *sql.DB) error {
		var before, after int
		if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM processed_inbound_message").Scan(&before); err != nil {
			return err
		}
		d, err := pipeline.Drift(ctx, m, conn)
		if err != nil {
			return err
		}
		if !d.Empty() {
			return fmt.Errorf("drift beside a writer: %+v", d)
		}
		if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM processed_inbound_message").Scan(&after); err != nil {
			return err
		}
		if before != after {
			return fmt.Errorf("read %d rows, then %d: not one snapshot", before, after)
		}
		return nil
	}
}

// writerEnv names the database a child process of the test binary
// writes to (TestWriterProcess); writerPauseEnv, if set, makes it commit
// once and then hold the database open without committing.
const (
	writerEnv      = "PIPELINE_TEST_WRITER_DB"
	writerPauseEnv = "PIPELINE_TEST_WRITER_PAUSE"
)

// TestWriterProcess is not a test: run as a child process with writerEnv
// set, it is an application's connection committing as fast as it can
// until its stdin closes. It prints "ready" once it has committed.
func TestWriterProcess(t *testing.T) {
	path := os.Getenv(writerEnv)
	if path == "" {
		t.Skip("only run as the writer process of TestReadStableBeside*")
	}
	writer, err := sql.Open("sqlite3", "file:"+path+"?mode=rw&_busy_timeout=5000&_txlock=immediate&_journal_mode=WAL")
	require.NoError(t, err)
	writer.SetMaxOpenConns(1)
	defer writer.Close()
	exec(t, writer, "PRAGMA wal_autocheckpoint = 100", "INSERT INTO processed_inbound_message (sender_user_id, sender_device_id, logical_id, processed_at) VALUES ('bob', 2, randomblob(16), 1)")
	fmt.Println("ready")
	stopped := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(stopped)
	}()
	pause := os.Getenv(writerPauseEnv) != ""
	for n := 0; ; n++ {
		select {
		case <-stopped:
			fmt.Println("commits", n)
			return
		default:
		}
		if pause {
			time.Sleep(time.Millisecond)
			continue
		}
		exec(t, writer, "INSERT INTO processed_inbound_message (sender_user_id, sender_device_id, logical_id, processed_at) VALUES ('bob', 2, randomblob(16), 1)")
	}
}

// startWriter starts the test binary as a writer process on path
// (TestWriterProcess) and returns once it has committed; stop ends it and
// returns how often it committed.
func startWriter(t *testing.T, path string, pause bool) (stop func() int) {
	t.Helper()
	env := []string{writerEnv + "=" + path}
	if pause {
		env = append(env, writerPauseEnv+"=1")
	}
	stopChild := migrationtest.StartChild(t, "TestWriterProcess", env...)
	return func() int {
		n := 0
		for _, line := range stopChild() {
			fmt.Sscanf(line, "commits %d", &n)
		}
		return n
	}
}

// TestReadStableBesideLiveWriter runs the drift check 100 times (20 under
// the race detector) while an
// application in another process commits as fast as it can: every run
// succeeds, each on one snapshot, and the reader creates nothing beside
// the file.
func TestReadStableBesideLiveWriter(t *testing.T) {
	ctx := context.Background()
	m := mustDefault(t)
	path := headFile(t)
	stop := startWriter(t, path, false)
	names := dirNames(t, filepath.Dir(path))
	require.Equal(t, []string{"client.db", "client.db-shm", "client.db-wal"}, names)

	failed := 0
	for range driftRuns {
		if err := pipeline.ReadStable(ctx, path, driftOf(ctx, m)); err != nil {
			failed++
			t.Log(err)
		}
	}
	require.Equal(t, names, dirNames(t, filepath.Dir(path)), "the reader created or removed nothing")
	commits := stop()
	require.Zero(t, failed, "drift runs that failed beside the writer")
	require.Greater(t, commits, driftRuns, "the writer committed throughout")
}

// TestReadStableBesideOpenWriterChangesNothing reads a database an
// application in another process holds open, with commits in its -wal:
// the database file, its -wal and its -shm are byte for byte as they
// were.
func TestReadStableBesideOpenWriterChangesNothing(t *testing.T) {
	ctx := context.Background()
	m := mustDefault(t)
	path := headFile(t)
	startWriter(t, path, true)
	before := fileBytes(t, filepath.Dir(path))
	require.Len(t, before, 3, "the file, its -wal and its -shm")
	for range 3 {
		require.NoError(t, pipeline.ReadStable(ctx, path, driftOf(ctx, m)))
	}
	after := fileBytes(t, filepath.Dir(path))
	for name, b := range before {
		require.True(t, b == after[name], "the reader changed %s", name)
	}
	require.Len(t, after, len(before), "the reader created a file")
}
