// Package migrationtest builds what tests of packages migration and
// cmd/internal/pipeline and of cmd/migrate need to exercise migration
// directories and database files: in-memory directories with an atlas.sum
// computed over them, the frozen version 14 baseline as text, the
// embedded Migrator, statements run on a test's database, copies of a
// database file with its companions, and a victim database that code
// under test must not reach (a confined connection replaying a hostile
// migration or fixture file that ATTACHes it, drops its table or copies
// itself beside it). Only tests import it; it writes
// files only in a test's temporary directories.
package migrationtest

import (
	"bufio"
	"database/sql"
	"io/fs"
	"os"
	osexec "os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"ariga.io/atlas/sql/migrate"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/schema"
)

// Head returns the head version of the embedded migration directory,
// failing tb if it is damaged. Tests take the head from here, never as a
// literal, so that adding a migration does not break them.
func Head(tb testing.TB) string {
	tb.Helper()
	return Default(tb).Head()
}

// HeadNumber is Head as a number.
func HeadNumber(tb testing.TB) int {
	tb.Helper()
	n, err := strconv.Atoi(Head(tb))
	require.NoError(tb, err)
	return n
}

// Next returns the version after the embedded head (head+1): the version
// of a test's scratch migration, and one this code does not know.
func Next(tb testing.TB) string {
	tb.Helper()
	return strconv.Itoa(HeadNumber(tb) + 1)
}

// NextFile returns the name of a scratch migration file of version Next
// with the given description: "<next>_<description>.sql".
func NextFile(tb testing.TB, description string) string {
	tb.Helper()
	return Next(tb) + "_" + description + ".sql"
}

// FutureRevision returns a statement recording version Next, which this
// code does not know, as applied in schema_revision.
func FutureRevision(tb testing.TB) string {
	tb.Helper()
	return `INSERT INTO schema_revision
	(version, description, type, applied, total, executed_at, execution_time, hash, operator_version)
	VALUES ('` + Next(tb) + `', 'future', 2, 1, 1, 0, 0, 'h1:x', 'newer')`
}

// SumFS returns a directory holding files (name to content) and an
// atlas.sum computed over them the way `atlas migrate hash` does, so
// that the directory is valid until a test changes it. It fails tb if
// Atlas cannot hash the files.
func SumFS(tb testing.TB, files map[string]string) fstest.MapFS {
	tb.Helper()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	fsys := fstest.MapFS{}
	var mf []migrate.File
	for _, n := range names {
		fsys[n] = &fstest.MapFile{Data: []byte(files[n])}
		if !strings.HasSuffix(n, ".sql") {
			continue // declarations (.expect.json) are not in atlas.sum
		}
		mf = append(mf, migrate.NewLocalFile(n, []byte(files[n])))
	}
	hf, err := migrate.NewHashFile(mf)
	require.NoError(tb, err)
	sum, err := hf.MarshalText()
	require.NoError(tb, err)
	fsys[migrate.HashFileName] = &fstest.MapFile{Data: sum}
	return fsys
}

// WithMigrations returns a copy of the embedded migration directory
// (schema.Migrations) with files (name to content) added or replaced and
// atlas.sum computed again over the result, as `migrate hash` does after
// a new migration is added. It fails tb if the embedded directory cannot
// be read.
func WithMigrations(tb testing.TB, files map[string]string) fstest.MapFS {
	tb.Helper()
	all := map[string]string{}
	names, err := fs.Glob(schema.Migrations(), schema.MigrationsDir+"/*.sql")
	require.NoError(tb, err)
	decl, err := fs.Glob(schema.Migrations(), schema.MigrationsDir+"/*.expect.json")
	require.NoError(tb, err)
	names = append(names, decl...)
	for _, n := range names {
		b, err := fs.ReadFile(schema.Migrations(), n)
		require.NoError(tb, err)
		all[path.Base(n)] = string(b)
	}
	for n, c := range files {
		all[n] = c
	}
	return SumFS(tb, all)
}

// Through returns the embedded directory through version
// (migration.Migrator.Through): the directory as it stood when version was
// head. Tests check what a
// migration does with it (migration 15's index on a version-14 database)
// as a fact of that migration, true whatever comes after it. It fails tb
// if the directory has no such version.
func Through(tb testing.TB, version string) *migration.Migrator {
	tb.Helper()
	m, err := Default(tb).Through(version)
	require.NoError(tb, err)
	return m
}

// LateMigration is a migration file added below the landed head: version
// 13, under the version-14 baseline every database already has.
var LateMigration = map[string]string{"13_late.sql": "CREATE TABLE late_note (id INTEGER PRIMARY KEY);\n"}

// BaselineSQL returns the frozen version 14 migration file, which tests
// apply by hand to build a database as version-14 code left it.
func BaselineSQL(tb testing.TB) string {
	tb.Helper()
	b, err := fs.ReadFile(schema.Migrations(), schema.MigrationsDir+"/14_baseline.sql")
	require.NoError(tb, err)
	return string(b)
}

// Default returns the Migrator of the embedded directory, failing tb if it
// is damaged.
func Default(tb testing.TB) *migration.Migrator {
	tb.Helper()
	m, err := migration.Default()
	require.NoError(tb, err)
	return m
}

// Exec runs stmts on conn in order, failing tb on the first that fails.
func Exec(tb testing.TB, conn *sql.DB, stmts ...string) {
	tb.Helper()
	for _, s := range stmts {
		_, err := conn.Exec(s)
		require.NoError(tb, err, s)
	}
}

// CopyFiles copies the database file at path and the given companions
// (suffixes such as "-wal") to client.db in a new temporary directory of
// tb, while a writer may hold them open: what a crash, or a backup of
// some of the files, leaves behind. It returns the copy's path.
func CopyFiles(tb testing.TB, path string, suffixes ...string) string {
	tb.Helper()
	dst := filepath.Join(tb.TempDir(), "client.db")
	for _, s := range append([]string{""}, suffixes...) {
		b, err := os.ReadFile(path + s)
		require.NoError(tb, err)
		require.NoError(tb, os.WriteFile(dst+s, b, 0o600))
	}
	return dst
}

// Victim creates victim.db, alone in a new temporary directory of tb, with
// one table peers holding one row, and returns its path.
func Victim(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "victim.db")
	conn, err := sql.Open(sqlitedriver.Name, path)
	require.NoError(tb, err)
	defer conn.Close()
	_, err = conn.Exec("CREATE TABLE peers (x INTEGER); INSERT INTO peers VALUES (1)")
	require.NoError(tb, err)
	require.NoError(tb, conn.Close())
	return path
}

// RequireVictimUntouched fails tb unless the database at path (made by
// Victim)
// still holds its table and row and nothing was created beside it.
func RequireVictimUntouched(tb testing.TB, path string) {
	tb.Helper()
	es, err := os.ReadDir(filepath.Dir(path))
	require.NoError(tb, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	require.Equal(tb, []string{filepath.Base(path)}, names, "nothing created beside the other database")
	conn, err := sql.Open(sqlitedriver.Name, "file:"+path+"?mode=ro")
	require.NoError(tb, err)
	defer conn.Close()
	var n int
	require.NoError(tb, conn.QueryRow("SELECT count(*) FROM peers").Scan(&n))
	require.Equal(tb, 1, n, "the other database is untouched")
}

// StartChild starts the test binary again as a child process running only
// the test named test, with env added to its environment (a test that
// plays an application when its variable is set), and returns once the
// child has printed "ready" on its first line. stop closes the child's
// stdin, which tells it to finish, waits for it and returns the lines it
// printed after "ready" (the test framework's own among them); it runs at
// the test's end if the test has not called it.
func StartChild(tb testing.TB, test string, env ...string) (stop func() (lines []string)) {
	tb.Helper()
	cmd := osexec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	require.NoError(tb, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(tb, err)
	cmd.Stderr = os.Stderr
	require.NoError(tb, cmd.Start())
	lines := bufio.NewScanner(stdout)
	require.True(tb, lines.Scan(), "the child %s started", test)
	require.Equal(tb, "ready", lines.Text())
	stopped := false
	stop = func() []string {
		if stopped {
			return nil
		}
		stopped = true
		stdin.Close()
		var out []string
		for lines.Scan() {
			out = append(out, lines.Text())
		}
		require.NoError(tb, cmd.Wait())
		return out
	}
	tb.Cleanup(func() { stop() })
	return stop
}
