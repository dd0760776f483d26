package pipeline

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"testing"

	_ "github.com/mattn/go-sqlite3"
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

// An application holds a WAL database open when a read begins and closes
// it just before SQLite opens the file: ReadStable reads it (the row
// committed to the -wal included), creates no file, and a read after it
// succeeds too. A read-only open of a WAL database whose -wal the
// application removed meanwhile would create an empty -wal, which every
// later read-only open refuses as needing recovery.
func TestReadStableAppClosesDuringOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "client.db")
	conn, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL")
	require.NoError(t, err)
	_, err = conn.Exec("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2), (3)")
	require.NoError(t, err)
	require.NoError(t, conn.Close())

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
