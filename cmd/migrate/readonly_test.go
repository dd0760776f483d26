package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mattn/go-sqlite3"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/cmd/internal/pipeline"
	"github.com/securemsg/storage/internal/testkit/migrationtest"
	"github.com/securemsg/storage/schema"
)

// readOnly makes path (a file or directory) read-only for the rest of the
// test, and writable again at cleanup so that t.TempDir can remove it.
func readOnly(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	mode := os.FileMode(0o444)
	if fi.IsDir() {
		mode = 0o555
	}
	require.NoError(t, os.Chmod(path, mode))
	t.Cleanup(func() { os.Chmod(path, fi.Mode().Perm()) })
}

// TestReadOnlyCommands runs the read-only commands on a head database that
// is a non-writable file, and one in a non-writable directory. As root the
// modes block nothing, so what is checked is what the commands do: they
// open the file read-only, change no byte and leave no -wal or -shm file.
func TestReadOnlyCommands(t *testing.T) {
	for _, where := range []string{"read-only file", "read-only directory"} {
		t.Run(where, func(t *testing.T) {
			path := headDB(t)
			dir := filepath.Dir(path)
			if where == "read-only file" {
				readOnly(t, path)
			} else {
				readOnly(t, dir)
			}
			before := snapshot(t, dir)
			require.Equal(t, []string{"client.db"}, keys(before))
			for _, args := range [][]string{
				{"status", "-db", path},
				{"status", "-db", path, "-json"},
				{"plan", "-db", path},
				{"plan", "-db", path, "-json"},
				{"drift", "-db", path},
				{"drift", "-db", path, "-json"},
			} {
				code, stdout, stderr := runCmd(t, args...)
				require.Equal(t, 0, code, "%v: %s", args, stderr)
				require.Empty(t, stderr, args)
				require.NotEmpty(t, stdout, args)
				require.NoFileExists(t, path+"-wal", args)
				require.NoFileExists(t, path+"-shm", args)
				require.Equal(t, before, snapshot(t, dir), "%v changed the directory", args)
			}
		})
	}
}

func keys(m map[string][32]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestReadOnlyThroughWAL checks that a database with a -wal beside it (open
// elsewhere, or not closed cleanly) is read through the WAL: a table
// committed only to the WAL is seen.
func TestReadOnlyThroughWAL(t *testing.T) {
	path := headDB(t)
	// A second connection keeps the WAL from being checkpointed away.
	writer := mustOpenRW(t, path)
	_, err := writer.Exec("DROP INDEX pending_outbound_message_recipient")
	require.NoError(t, err)
	require.FileExists(t, path+"-wal")

	code, stdout, _ := runCmd(t, "drift", "-db", path)
	require.Equal(t, 1, code)
	require.Contains(t, stdout, "CREATE INDEX `pending_outbound_message_recipient`")
}

func TestUpCannotCreate(t *testing.T) {
	t.Run("missing directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "nope")
		path := filepath.Join(dir, "x.db")
		code, stdout, stderr := runCmd(t, "up", "-db", path)
		require.Equal(t, exitError, code)
		require.Empty(t, stdout)
		require.Equal(t, "migrate: up: cannot create "+path+": directory "+dir+" does not exist\n", stderr)
		require.NoDirExists(t, dir)
	})
	t.Run("unwritable directory", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("running as root: a directory's mode does not stop root from creating files in it")
		}
		dir := filepath.Join(t.TempDir(), "rodir")
		require.NoError(t, os.Mkdir(dir, 0o755))
		readOnly(t, dir)
		path := filepath.Join(dir, "x.db")
		code, stdout, stderr := runCmd(t, "up", "-db", path)
		require.Equal(t, 1, code)
		require.Empty(t, stdout)
		require.Equal(t, "migrate: up: cannot create "+path+": permission denied in directory "+dir+"\n", stderr)
		require.Empty(t, snapshot(t, dir))
	})
	t.Run("unwritable file", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("running as root: a file's mode does not stop root from writing it")
		}
		path := v14DB(t)
		readOnly(t, path)
		before := snapshot(t, filepath.Dir(path))
		code, _, stderr := runCmd(t, "up", "-db", path)
		require.Equal(t, 1, code)
		require.Contains(t, stderr, "permission denied")
		require.Equal(t, before, snapshot(t, filepath.Dir(path)))
	})
	t.Run("unreadable file", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("running as root: a file's mode does not stop root from reading it")
		}
		path := headDB(t)
		require.NoError(t, os.Chmod(path, 0))
		t.Cleanup(func() { os.Chmod(path, 0o644) })
		for _, cmd := range []string{"status", "plan", "drift"} {
			code, _, stderr := runCmd(t, cmd, "-db", path)
			require.Equal(t, 1, code)
			require.Contains(t, stderr, "permission denied", cmd)
		}
	})
}

func TestUpEmptyFile(t *testing.T) {
	path := newDB(t)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Zero(t, fi.Size())
	code, stdout, stderr := runCmd(t, "up", "-db", path)
	require.Equal(t, 0, code, stderr)
	require.True(t, strings.HasPrefix(stdout, expand(t, path+" is an empty file: creating the database in it\napplied: {versions}\n")), stdout)
}

// mustOpenRW opens path read-write with one connection held open (WAL mode
// keeps its -wal and -shm while it is), closed at cleanup.
func mustOpenRW(tb testing.TB, path string) *sql.DB {
	tb.Helper()
	conn, err := sql.Open("sqlite3", "file:"+path+"?mode=rw")
	require.NoError(tb, err)
	conn.SetMaxOpenConns(1)
	tb.Cleanup(func() { conn.Close() })
	require.NoError(tb, conn.Ping())
	return conn
}

// TestReadStableWritesNothing reads a WAL database through
// pipeline.ReadStable and checks, while its connection is open (when a
// read-write or query-only connection has its -wal and -shm), that
// nothing was created beside the file and that a write is refused.
// Unlike the file modes, this holds as root too.
func TestReadStableWritesNothing(t *testing.T) {
	path := headDB(t)
	require.True(t, walHeader(t, path))
	before := snapshot(t, filepath.Dir(path))
	err := pipeline.ReadStable(context.Background(), path, func(conn *sql.DB) error {
		var n int
		require.NoError(t, conn.QueryRow("SELECT count(*) FROM schema_revision").Scan(&n))
		require.Equal(t, len(allVersions(t)), n)
		require.NoFileExists(t, path+"-wal")
		require.NoFileExists(t, path+"-shm")
		_, err := conn.Exec("DELETE FROM schema_revision")
		var se sqlite3.Error
		require.ErrorAs(t, err, &se)
		require.Equal(t, sqlite3.ErrReadonly, se.Code)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, before, snapshot(t, filepath.Dir(path)))
}

func TestUnknownStateCountsTables(t *testing.T) {
	for _, tt := range []struct {
		stmts []string
		want  string
	}{
		{[]string{"CREATE TABLE notes (id INTEGER PRIMARY KEY)"}, "1 table, user_version 0 and no schema_revision"},
		{[]string{"CREATE TABLE a (x)", "CREATE TABLE b (x)"}, "2 tables, user_version 0 and no schema_revision"},
		{[]string{schema.RevisionTable(), "CREATE TABLE a (x)"}, "1 table, user_version 0 and an empty schema_revision"},
	} {
		code, _, stderr := runCmd(t, "status", "-db", newDB(t, tt.stmts...))
		require.Equal(t, exitError, code)
		require.Contains(t, stderr, tt.want)
		if strings.Contains(tt.want, "empty") {
			require.NotContains(t, stderr, "no schema_revision")
		}
	}
}

// meetWriter returns a reader for cmdEnv.readStable that makes the
// commands' read-only reads meet a writer: on each of the first `times`
// reads, once the read-only connection is open (its first query ran) and
// before the command reads, stmt is committed by a writer. If closes, the
// writer opens the database for each commit and closes it, which
// checkpoints the commit into the file under the read (in this process
// the close also drops ReadStable's lock, as another process's could
// not); else it is opened once, first running setup, and stays open, as
// an app would (its commits stay in the -wal). reads counts the reads
// that ran.
func meetWriter(t *testing.T, path string, times int, setup, stmt string, closes bool) (reader func(context.Context, string, func(*sql.DB) error) error, reads *int) {
	t.Helper()
	open := func() *sql.DB {
		w, err := sql.Open("sqlite3", "file:"+path+"?mode=rw&_busy_timeout=5000")
		require.NoError(t, err)
		w.SetMaxOpenConns(1)
		return w
	}
	var writer *sql.DB
	if !closes {
		writer = open()
		t.Cleanup(func() { writer.Close() })
		if setup != "" {
			_, err := writer.Exec(setup)
			require.NoError(t, err, setup)
		}
	}
	reads = new(int)
	reader = func(ctx context.Context, path string, read func(*sql.DB) error) error {
		return pipeline.ReadStable(ctx, path, func(conn *sql.DB) error {
			*reads++
			var v int
			if err := conn.QueryRow("PRAGMA schema_version").Scan(&v); err != nil {
				return err
			}
			if *reads <= times {
				w := writer
				if closes {
					w = open()
				}
				_, err := w.Exec(stmt)
				require.NoError(t, err, stmt)
				if closes {
					require.NoError(t, w.Close())
				}
			}
			return read(conn)
		})
	}
	return reader, reads
}

// TestReadOnlyNoticesWriter commits a write between a read-only command's
// open of the database and its read. A cleanly closed database is opened
// immutable (SQLite takes no lock and would not see the writer's -wal):
// a commit checkpointed into the file under it makes the command read
// again and report the database as it now is; one left in a -wal that
// came after the read began leaves the file, and the snapshot the read
// began on, as they were, and is not waited for. If the file keeps
// changing, the command fails and reports nothing.
func TestReadOnlyNoticesWriter(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		setup  string
		stmt   string
		times  int
		closes bool
		code   int
		stdout string // contained in stdout
		stderr string // contained in stderr
		reads  int
	}{
		{
			name: "drift sees a dropped index", args: []string{"drift"},
			stmt: "DROP INDEX pending_outbound_message_recipient", times: 1, closes: true,
			code: 1, stdout: "CREATE INDEX `pending_outbound_message_recipient`", reads: 2,
		},
		{
			name: "status sees a deleted revision", args: []string{"status"},
			stmt: "DELETE FROM schema_revision WHERE version = '{head}'", times: 1, closes: true,
			code: exitFinding, stdout: "current: {beforehead}\npending: {head}\n", reads: 2,
		},
		{
			// Its schema is the head's, its history says the version
			// before: up refuses it, and plan says so too.
			name: "plan sees a deleted revision", args: []string{"plan", "-json"},
			stmt: "DELETE FROM schema_revision WHERE version = '{head}'", times: 1, closes: true,
			code: exitFinding, stdout: `"current": "{beforehead}"`, reads: 2,
		},
		{
			// The commit went to a -wal that came after the read began.
			name: "a writer that opens during the read", args: []string{"drift"},
			stmt: "DROP INDEX pending_outbound_message_recipient", times: 1,
			code: exitOK, stdout: "no drift", reads: 1,
		},
		// The writer keeps the database open: it is read through its
		// -wal, on one snapshot, whatever the writer commits meanwhile.
		{
			name: "a writer on every read", args: []string{"status"},
			setup: "CREATE TABLE w (x)", stmt: "INSERT INTO w VALUES (1)", times: 3,
			code: exitOK, stdout: "current: {head}\npending: none\n", reads: 1,
		},
		{
			name: "a writer on every read, JSON", args: []string{"drift", "-json"},
			setup: "CREATE TABLE w (x)", stmt: "INSERT INTO w VALUES (1)", times: 3,
			code: exitFinding, stdout: `"name": "w"`, reads: 1,
		},
		{
			name: "a closing writer on every read", args: []string{"status"},
			stmt: "CREATE TABLE IF NOT EXISTS w (x); INSERT INTO w VALUES (1)", times: 10, closes: true,
			code: exitError, stderr: "no stable snapshot", reads: 10,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := headDB(t)
			require.NoFileExists(t, path+"-wal", "closed cleanly")
			reader, reads := meetWriter(t, path, tt.times, tt.setup, expand(t, tt.stmt), tt.closes)
			var out, errOut bytes.Buffer
			code := runEnv(append(tt.args, "-db", path), &cmdEnv{stdout: &out, stderr: &errOut, readStable: reader})
			stdout, stderr := out.String(), errOut.String()
			require.Equal(t, tt.code, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			require.Contains(t, stdout, expand(t, tt.stdout))
			require.Contains(t, stderr, tt.stderr)
			require.Equal(t, tt.reads, *reads)
			if tt.code != 0 && tt.stderr != "" {
				require.Empty(t, stdout, "nothing reported from a changing file")
			}
		})
	}
}

// copyOpen runs stmts on a read-write connection to the database at path
// that stays open, and returns a copy of the file with its companion
// ("-wal" or "-journal") as the writer has them: what a crash, or a copy
// of a live database, leaves.
func copyOpen(t *testing.T, path, companion string, stmts ...string) string {
	t.Helper()
	w := mustOpenRW(t, path)
	for _, s := range stmts {
		_, err := w.Exec(s)
		require.NoError(t, err, s)
	}
	require.FileExists(t, path+companion)
	return migrationtest.CopyFiles(t, path, companion)
}

// TestReadOnlyNeedsRecovery runs the read-only commands on a head
// database left with a hot rollback journal, and on one whose -wal lies
// without its -shm: each fails, exit 1, says the database needs a
// read-write open (not that permission was denied), in its JSON document
// too, and leaves the directory byte for byte as it was.
func TestReadOnlyNeedsRecovery(t *testing.T) {
	hotJournal := func(t *testing.T) string {
		return copyOpen(t, headDB(t, "PRAGMA journal_mode = DELETE", "CREATE TABLE filler (x)"), "-journal", "PRAGMA cache_size = 1", "BEGIN",
			"WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 20000) INSERT INTO filler SELECT randomblob(64) FROM n")
	}
	walWithoutShm := func(t *testing.T) string {
		return copyOpen(t, headDB(t), "-wal", "DELETE FROM schema_revision WHERE version = '15'")
	}
	for name, setup := range map[string]func(*testing.T) string{"hot journal": hotJournal, "-wal without -shm": walWithoutShm} {
		t.Run(name, func(t *testing.T) {
			path := setup(t)
			dir := filepath.Dir(path)
			before := snapshot(t, dir)
			for _, cmd := range []string{"status", "plan", "drift"} {
				code, stdout, stderr := runCmd(t, cmd, "-db", path)
				require.Equal(t, exitError, code, cmd)
				require.Empty(t, stdout, cmd)
				require.Contains(t, stderr, "migrate: "+cmd+": pipeline: database needs recovery by a read-write open", cmd)
				require.NotContains(t, stderr, "permission denied", cmd)

				code, stdout, _ = runCmd(t, cmd, "-db", path, "-json")
				require.Equal(t, exitError, code, cmd)
				var doc errorDoc
				require.NoError(t, json.Unmarshal([]byte(stdout), &doc), stdout)
				require.False(t, doc.OK)
				require.Equal(t, path, doc.DB, "the error document has the fields a success has")
				require.Equal(t, headVersion(t), doc.Head)
				require.Contains(t, doc.Error, "needs recovery", cmd)
				require.Equal(t, before, snapshot(t, dir), "%s changed the directory", cmd)
			}
		})
	}
}

// TestUpRecovers runs up on a head database that only needs a read-write
// open: a -wal left without its -shm, and a hot rollback journal of an
// insert that never committed. The read-only commands refuse both
// (TestReadOnlyNeedsRecovery); up recovers them (the -wal's commit kept,
// the journal's insert rolled back), exits 0, and every command works on
// the database afterwards.
func TestUpRecovers(t *testing.T) {
	const insert = "INSERT INTO processed_inbound_message (sender_user_id, sender_device_id, logical_id, processed_at) VALUES ('bob', 2, randomblob(16), 1)"
	tests := []struct {
		name  string
		setup func(t *testing.T) string
		rows  int64 // processed_inbound_message rows after up
	}{
		{name: "-wal without -shm", rows: 1, setup: func(t *testing.T) string {
			return copyOpen(t, headDB(t), "-wal", insert)
		}},
		{name: "hot journal", rows: 0, setup: func(t *testing.T) string {
			return copyOpen(t, headDB(t, "PRAGMA journal_mode = DELETE"), "-journal", "PRAGMA cache_size = 1", "BEGIN",
				"WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 20000) INSERT INTO processed_inbound_message (sender_user_id, sender_device_id, logical_id, processed_at) SELECT 'bob', 2, randomblob(16), x FROM n")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.setup(t)
			code, _, stderr := runCmd(t, "status", "-db", path)
			require.Equal(t, exitError, code, "the read-only commands cannot read it")
			require.Contains(t, stderr, "needs recovery")

			code, stdout, stderr := runCmd(t, "up", "-db", path)
			require.Equal(t, exitOK, code, stderr)
			require.Equal(t, expand(t, "already at version {head}\n"), stdout)
			require.Equal(t, tt.rows, query[int64](t, path, "SELECT count(*) FROM processed_inbound_message"))
			for _, cmd := range []string{"status", "plan", "drift"} {
				code, _, stderr := runCmd(t, cmd, "-db", path)
				require.Equal(t, exitOK, code, "%s: %s", cmd, stderr)
			}
		})
	}
}

// TestNoStableSnapshot has a writer open the database, commit and close
// it during every read-only read: the command gives up after bounded
// retries, exit 2, and says exactly that, reporting nothing it read.
func TestNoStableSnapshot(t *testing.T) {
	path := headDB(t)
	reads := 0
	reader := func(ctx context.Context, path string, read func(*sql.DB) error) error {
		return pipeline.ReadStable(ctx, path, func(conn *sql.DB) error {
			reads++
			var v int
			if err := conn.QueryRow("PRAGMA schema_version").Scan(&v); err != nil {
				return err
			}
			w := mustOpenRW(t, path)
			_, err := w.Exec("INSERT INTO processed_inbound_message (sender_user_id, sender_device_id, logical_id, processed_at) VALUES ('bob', 2, randomblob(16), ?)", reads)
			require.NoError(t, err)
			require.NoError(t, w.Close())
			return read(conn)
		})
	}
	var out, errOut bytes.Buffer
	code := runEnv([]string{"status", "-db", path}, &cmdEnv{stdout: &out, stderr: &errOut, readStable: reader})
	require.Equal(t, exitError, code)
	require.Empty(t, out.String(), "nothing reported from a changing file")
	require.Equal(t, 10, reads, "every attempt read")
	require.Equal(t, "migrate: status: pipeline: no stable snapshot of the database could be read: "+path+": it changed during the read on each of 10 attempts\n", withoutSource(errOut.String()))
}
