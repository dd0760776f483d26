package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"testing"

	"github.com/mattn/go-sqlite3"
	"github.com/stretchr/testify/require"
)

// A read through the -wal whose -wal is gone by the time it connects (the
// application closed the database meanwhile) fails rather than open the
// file: a read-only open of a WAL database without its -wal creates an
// empty one beside it.
func TestSnapshotConnectorWALGone(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "client.db")
	conn, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL")
	require.NoError(t, err)
	_, err = conn.Exec("CREATE TABLE t (x INTEGER)")
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	require.NoFileExists(t, path+"-wal")

	c := snapshotConnector{dsn: readOnlyDSN(path, false), wal: path + "-wal"}
	_, err = c.Connect(ctx)
	require.ErrorIs(t, err, errWALGone)
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, es, 1, "nothing created beside the file")
}

// holdEnv names the database a child process of the test binary holds
// open (TestHoldingApp).
const holdEnv = "PIPELINE_TEST_HOLD_DB"

// TestHoldingApp is not a test: run as a child process with holdEnv set,
// it is an application that opens the database in WAL mode, commits a
// row (kept in its -wal), says "ready", and on a line "close" on its
// stdin closes the database, as the last connection removing the -wal
// and -shm if it can, and says "closed".
func TestHoldingApp(t *testing.T) {
	path := os.Getenv(holdEnv)
	if path == "" {
		t.Skip("only run as the application of TestReadStableAppClosesDuringOpen")
	}
	conn, err := sql.Open("sqlite3", "file:"+path+"?mode=rw&_busy_timeout=5000&_journal_mode=WAL")
	require.NoError(t, err)
	conn.SetMaxOpenConns(1)
	_, err = conn.Exec("PRAGMA wal_autocheckpoint = 0; INSERT INTO t VALUES (4)")
	require.NoError(t, err)
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() && in.Text() != "close" {
	}
	require.NoError(t, conn.Close())
	fmt.Println("closed")
}

// walDatabase returns a new WAL database in a directory of its own, with
// a table t of three rows, closed: nothing lies beside it.
func walDatabase(t *testing.T) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	path = filepath.Join(dir, "client.db")
	conn, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL")
	require.NoError(t, err)
	_, err = conn.Exec("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2), (3)")
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	return dir, path
}

// heldShm starts TestHoldingApp on path (walDatabase) and returns its
// -shm, opened for writing, so that a test can plant a state in it.
func heldShm(t *testing.T, path string) *os.File {
	t.Helper()
	startHoldingApp(t, path)
	shm, err := os.OpenFile(path+"-shm", os.O_RDWR, 0)
	require.NoError(t, err)
	t.Cleanup(func() { shm.Close() })
	return shm
}

// startHoldingApp starts TestHoldingApp on path, a database with a table
// t, and returns once it is ready, with its stdin and its lines of output.
func startHoldingApp(t *testing.T, path string) (io.WriteCloser, *bufio.Scanner) {
	t.Helper()
	app := osexec.Command(os.Args[0], "-test.run=^TestHoldingApp$")
	app.Env = append(os.Environ(), holdEnv+"="+path)
	app.Stderr = os.Stderr
	stdin, err := app.StdinPipe()
	require.NoError(t, err)
	stdout, err := app.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, app.Start())
	t.Cleanup(func() { stdin.Close(); _ = app.Wait() })
	lines := bufio.NewScanner(stdout)
	require.True(t, lines.Scan())
	require.Equal(t, "ready", lines.Text())
	return stdin, lines
}

// An application holds a WAL database open when a read begins and closes
// it just before SQLite opens the file: ReadStable reads it (the row
// committed to the -wal included), creates no file, and a read after it
// succeeds too. A read-only open of a WAL database whose -wal the
// application removed meanwhile would create an empty -wal, which every
// later read-only open refuses as needing recovery.
func TestReadStableAppClosesDuringOpen(t *testing.T) {
	ctx := context.Background()
	dir, path := walDatabase(t)

	stdin, lines := startHoldingApp(t, path)
	names := func() []string {
		es, err := os.ReadDir(dir)
		require.NoError(t, err)
		var out []string
		for _, e := range es {
			out = append(out, e.Name())
		}
		return out
	}
	open := names()
	require.ElementsMatch(t, []string{"client.db", "client.db-wal", "client.db-shm"}, open)

	closed := false
	openHook = func() {
		if closed {
			return
		}
		closed = true
		_, err := io.WriteString(stdin, "close\n")
		require.NoError(t, err)
		require.True(t, lines.Scan())
		require.Equal(t, "closed", lines.Text())
	}
	t.Cleanup(func() { openHook = nil })
	count := func() (n int, err error) {
		err = ReadStable(ctx, path, func(conn *sql.DB) error {
			return conn.QueryRow("SELECT count(*) FROM t").Scan(&n)
		})
		return n, err
	}
	n, err := count()
	require.NoError(t, err)
	require.True(t, closed, "the application closed during the read")
	require.Equal(t, 4, n, "the row the application committed is read")
	require.Subset(t, open, names(), "the read created nothing")
	if fi, err := os.Stat(path + "-wal"); err == nil {
		require.NotZero(t, fi.Size(), "no empty -wal")
	}

	n, err = count()
	require.NoError(t, err, "a later read")
	require.Equal(t, 4, n)
}

// A reader that may not write the -shm gives up where a read-write one
// would write or wait: when the two copies of the -shm's header differ (a
// writer is updating it), and when no read mark is at or below the last
// commit (a writer just moved the one it used). ReadStable reads again,
// and succeeds once the writer is done; if the -shm stays so on every
// attempt, it says the database needs a read-write open, with SQLite's
// error. Each case plants the state in the -shm of an application that
// holds the database open, idle, with a commit in its -wal.
func TestReadStableShmMidUpdate(t *testing.T) {
	// Offsets in the -shm (SQLite's wal.c): two copies of the 48-byte
	// header, then the checkpoint info, whose aReadMark[1..4] follow
	// nBackfill and aReadMark[0].
	const (
		secondHeaderChange = 48 + 8
		readMarks          = 96 + 8
	)
	for _, tc := range []struct {
		name   string
		offset int64
		plant  []byte
		code   sqlite3.ErrNoExtended
	}{
		{"header copies differ", secondHeaderChange, []byte{0xa5, 0x5a, 0xa5, 0x5a}, sqlite3.ErrReadonlyRecovery},
		{"no read mark below the last commit", readMarks, bytes.Repeat([]byte{0xff}, 16), errReadonlyCantInit},
	} {
		for _, persists := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/persists=%v", tc.name, persists), func(t *testing.T) {
				ctx := context.Background()
				dir, path := walDatabase(t)
				shm := heldShm(t, path)
				was := make([]byte, len(tc.plant))
				_, err := shm.ReadAt(was, tc.offset)
				require.NoError(t, err)
				require.NotEqual(t, tc.plant, was)
				attempts := 0
				openHook = func() {
					attempts++
					put := was
					if attempts == 1 || persists {
						put = tc.plant
					}
					_, err := shm.WriteAt(put, tc.offset)
					require.NoError(t, err)
				}
				t.Cleanup(func() { openHook = nil })

				var n int
				err = ReadStable(ctx, path, func(conn *sql.DB) error {
					return conn.QueryRow("SELECT count(*) FROM t").Scan(&n)
				})
				names, derr := os.ReadDir(dir)
				require.NoError(t, derr)
				require.Len(t, names, 3, "nothing created beside the file, its -wal and -shm")
				if persists {
					require.ErrorIs(t, err, ErrNeedsRecovery)
					var se sqlite3.Error
					require.ErrorAs(t, err, &se)
					require.Equal(t, tc.code, se.ExtendedCode)
					require.Equal(t, readAttempts, attempts)
					return
				}
				require.NoError(t, err)
				require.Equal(t, 2, attempts, "one attempt met the -shm mid-update, the next read it")
				require.Equal(t, 4, n, "the row in the -wal is read")
			})
		}
	}
}

// When the attempts were upset by different things, ErrChanged says what
// upset the last one, and not that it upset each: here the first attempt
// meets the -shm mid-update, and every later one a -journal that comes or
// goes while it reads.
func TestReadStableSaysWhatUpsetTheLastAttempt(t *testing.T) {
	ctx := context.Background()
	_, path := walDatabase(t)
	shm := heldShm(t, path)
	const readMarks = 96 + 8 // aReadMark[1..4] (see TestReadStableShmMidUpdate)
	attempts := 0
	openHook = func() {
		attempts++
		if attempts == 1 {
			_, err := shm.WriteAt(bytes.Repeat([]byte{0xff}, 16), readMarks)
			require.NoError(t, err)
			return
		}
		// An empty -journal is never hot: SQLite reads on, and only
		// ReadStable sees it come or go.
		if err := os.Remove(path + "-journal"); os.IsNotExist(err) {
			require.NoError(t, os.WriteFile(path+"-journal", nil, 0o644))
		}
	}
	t.Cleanup(func() { openHook = nil })

	err := ReadStable(ctx, path, func(conn *sql.DB) error {
		var n int
		return conn.QueryRow("SELECT count(*) FROM t").Scan(&n)
	})
	require.ErrorIs(t, err, ErrChanged)
	require.Equal(t, readAttempts, attempts)
	require.Contains(t, err.Error(), "it changed during the read on the last of")
	require.NotContains(t, err.Error(), "on each of")
}

// A writer that opens a quiet database and commits to a new -wal just as
// an immutable connection opens it (before its read transaction begins)
// makes that attempt read again, through the -wal: SQLite may have read
// the -wal without its locks. The row committed there is read.
func TestReadStableWALComesWhileOpening(t *testing.T) {
	ctx := context.Background()
	_, path := walDatabase(t)
	attempts := 0
	openHook = func() {
		attempts++
		if attempts > 1 {
			return
		}
		w, err := sql.Open("sqlite3", "file:"+path+"?mode=rw&_busy_timeout=5000")
		require.NoError(t, err)
		w.SetMaxOpenConns(1)
		_, err = w.Exec("INSERT INTO t VALUES (4)")
		require.NoError(t, err)
		t.Cleanup(func() { w.Close() })
	}
	t.Cleanup(func() { openHook = nil })
	var n int
	err := ReadStable(ctx, path, func(conn *sql.DB) error {
		return conn.QueryRow("SELECT count(*) FROM t").Scan(&n)
	})
	require.NoError(t, err)
	require.Equal(t, 2, attempts, "the immutable open, then the read through the -wal")
	require.Equal(t, 4, n)
}
