package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"ariga.io/atlas/sql/migrate"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/cmd/internal/pipeline"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/testkit/migrationtest"
	"github.com/securemsg/storage/schema"
)

// runCmd runs the command line args and returns its exit code and output.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), withoutSource(errOut.String())
}

// sourceLine is the line a text-mode run prints first on stderr, naming
// the migration directory it read and its head.
var sourceLine = regexp.MustCompile(`^migrate: migrations \S+, head [0-9]+\n`)

// withoutSource returns stderr without its sourceLine, which
// TestMigrationsSource checks; the other tests check what follows it.
func withoutSource(stderr string) string { return sourceLine.ReplaceAllString(stderr, "") }

// newDB creates a database file in a temporary directory, runs stmts on
// it and closes it.
func newDB(t *testing.T, stmts ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "client.db")
	conn, err := sql.Open("sqlite3", "file:"+path+"?_foreign_keys=on")
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.Ping())
	for _, s := range stmts {
		_, err := conn.Exec(s)
		require.NoError(t, err, s)
	}
	return path
}

// v14DB returns a database file as version-14 code left it (the
// baseline, user_version 14, no schema history) after running stmts on it.
func v14DB(t *testing.T, stmts ...string) string {
	t.Helper()
	return newDB(t, append([]string{baselineSQL(t), "PRAGMA user_version = 14"}, stmts...)...)
}

// headDB returns a database file migrated to head by the command.
func headDB(t *testing.T, stmts ...string) string {
	t.Helper()
	stmts = expandAll(t, stmts)
	path := filepath.Join(t.TempDir(), "client.db")
	code, _, stderr := runCmd(t, "up", "-db", path)
	require.Equal(t, 0, code, stderr)
	if len(stmts) > 0 {
		conn, err := sql.Open("sqlite3", "file:"+path)
		require.NoError(t, err)
		defer conn.Close()
		for _, s := range stmts {
			_, err := conn.Exec(s)
			require.NoError(t, err, s)
		}
	}
	return path
}

// v14With returns a table's db setup: v14DB with stmts.
func v14With(stmts ...string) func(t *testing.T) string {
	return func(t *testing.T) string {
		t.Helper()
		return v14DB(t, stmts...)
	}
}

// headWith returns a table's db setup: headDB with stmts.
func headWith(stmts ...string) func(t *testing.T) string {
	return func(t *testing.T) string {
		t.Helper()
		return headDB(t, stmts...)
	}
}

// baselineSQL is the frozen version 14 file.
var baselineSQL = migrationtest.BaselineSQL

// snapshot returns the names and SHA-256 of every file in dir: a database
// "unchanged" is byte for byte unchanged, with no file left beside it.
func snapshot(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string][32]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out[e.Name()] = sha256.Sum256(b)
	}
	return out
}

// runUnchanged runs the command cmd -db path and returns its output; the
// command must exit with want (0 clean, 1 a finding) and leave the
// directory of path byte for byte as it found it.
func runUnchanged(t *testing.T, path, cmd string, want int) (stdout string) {
	t.Helper()
	before := snapshot(t, filepath.Dir(path))
	code, stdout, stderr := runCmd(t, cmd, "-db", path)
	require.Equal(t, want, code, stderr)
	require.Equal(t, before, snapshot(t, filepath.Dir(path)), "%s changed the database", cmd)
	return stdout
}

func query[T any](t *testing.T, path, q string) T {
	t.Helper()
	var v T
	require.NoError(t, pipeline.ReadStable(context.Background(), path, func(conn *sql.DB) error {
		return conn.QueryRow(q).Scan(&v)
	}))
	return v
}

// walHeader reports whether the database header at path says WAL (file
// format read and write versions 2), without opening the file with SQLite.
func walHeader(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, len(b), 20)
	return b[18] == 2 && b[19] == 2
}

func TestUpCreatesAndMigrates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub dir?#%", "client.db")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))

	code, stdout, stderr := runCmd(t, "up", "-db", path)
	require.Equal(t, 0, code, stderr)
	require.Empty(t, stderr)
	require.Equal(t, expand(t, "creating new database "+path+"\napplied: {versions}\nnow at version {head}\n"), stdout)

	require.FileExists(t, path)
	require.Equal(t, migrationtest.HeadNumber(t), query[int](t, path, "PRAGMA user_version"))
	require.Equal(t, len(allVersions(t)), query[int](t, path, "SELECT count(*) FROM schema_revision"))
	require.True(t, walHeader(t, path), "the file is in WAL mode")
	require.Equal(t, 1, query[int](t, path,
		`SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'pending_outbound_message_recipient'`))
}

func TestUpTwice(t *testing.T) {
	require.Equal(t, expand(t, "already at version {head}\n"), runUnchanged(t, headDB(t), "up", exitOK))
}

func TestUpAdoptsLegacyV14(t *testing.T) {
	path := v14DB(t,
		`INSERT INTO session VALUES ('bob', 2, x'03')`)
	code, stdout, stderr := runCmd(t, "up", "-db", path)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, expand(t, "applied: {above14}\nnow at version {head}\n"), stdout)
	require.Equal(t, 1, query[int](t, path, "SELECT count(*) FROM session"))
	require.Equal(t, 1, query[int](t, path, "SELECT type FROM schema_revision WHERE version = '14'"),
		"version 14 recorded as the baseline")
}

func TestStatus(t *testing.T) {
	tests := []struct {
		name string
		db   func(t *testing.T) string
		want string
		code int // pending versions are a finding
	}{
		{name: "head", db: headWith(), want: "current: {head}\npending: none\n", code: exitOK},
		{name: "empty file", db: func(t *testing.T) string { return newDB(t) }, want: "current: none (empty database)\npending: {versions}\n", code: exitFinding},
		{
			name: "legacy v14",
			db:   v14With(),
			want: "current: 14\npending: {above14}\n",
			code: exitFinding,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, expand(t, tt.want), runUnchanged(t, tt.db(t), "status", tt.code))
		})
	}
}

func TestStatusMissingFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "missing.db")
	code, stdout, stderr := runCmd(t, "status", "-db", path)
	require.Equal(t, exitError, code)
	require.Empty(t, stdout)
	require.Equal(t, "migrate: status: "+path+": no such database file\n", stderr)
	require.NoFileExists(t, path)
	require.Empty(t, snapshot(t, dir), "nothing created")
}

func TestPlanFreshPath(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "new.db")
	code, stdout, stderr := runCmd(t, "plan", "-db", path)
	require.Equal(t, exitFinding, code, stderr)
	require.Equal(t, fmt.Sprintf("migrate: plan: %d version(s) pending (%s): run up\n", len(allVersions(t)), versionList(t)), stderr)
	require.Empty(t, snapshot(t, dir), "plan created nothing")

	for _, want := range []string{
		"-- version 14: baseline (8 statements)\n",
		"CREATE TABLE storage_key (",
		"CREATE TABLE processed_inbound_message (",
		"-- version 15: pending_outbound_recipient_index (1 statement)\n",
		"CREATE INDEX pending_outbound_message_recipient\n  ON pending_outbound_message (recipient_user_id, recipient_device_id, sequence);\n",
	} {
		require.Contains(t, stdout, want)
	}
	require.Less(t, strings.Index(stdout, "-- version 14"), strings.Index(stdout, "-- version 15"))
	empty, err := sql.Open("sqlite3", "file:"+newDB(t))
	require.NoError(t, err)
	defer empty.Close()
	plan, err := migrationtest.Default(t).Plan(context.Background(), empty)
	require.NoError(t, err)
	statements := 0
	for _, f := range plan {
		statements += len(f.Statements)
	}
	require.GreaterOrEqual(t, statements, 9, "14's 8 and 15's 1")
	require.Equal(t, statements, strings.Count(stdout, ";\n"), "every version's statements")
}

// TestPlanFreshPathBrokenMigration plans a missing file against a
// directory whose next migration does not run: the replay's error is the
// command's, in text and in JSON, not an empty plan.
func TestPlanFreshPathBrokenMigration(t *testing.T) {
	broken := writeDir(t, withFiles(t, map[string]string{"{next}_bad.sql": "CREATE TABLEX foo (a INT);\n"}))
	tests := []struct {
		name     string
		json     bool
		existing bool
	}{
		{name: "text"},
		{name: "json", json: true},
		{name: "an existing database", existing: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "missing.db")
			if tt.existing {
				db = v14DB(t)
				dir = filepath.Dir(db)
			}
			before := snapshot(t, dir)
			args := []string{"plan", "-db", db, "-dir", broken}
			if tt.json {
				args = append(args, "-json")
			}
			code, stdout, stderr := runCmd(t, args...)
			require.Equal(t, exitError, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			require.NotContains(t, stdout, "nothing to apply")
			require.Contains(t, stderr, "TABLEX")
			require.NotContains(t, stderr, "open "+db, "the migration's error, not the database's")
			if tt.json {
				doc := decode[planDoc](t, stdout)
				require.False(t, doc.OK)
				require.Contains(t, doc.Error, "TABLEX")
			}
			require.Equal(t, before, snapshot(t, dir), "plan changed nothing")
		})
	}
}

// TestPlanLegacyV14 plans a database version-14 code left (the
// baseline, user_version 14, no history): the baseline is adopted, not
// run again, so the plan is every version above 14 and creates none of
// the baseline's tables (a later version may create tables of its own).
func TestPlanLegacyV14(t *testing.T) {
	stdout := runUnchanged(t, v14DB(t), "plan", exitFinding)
	require.NotContains(t, stdout, "-- version 14")
	var planned []string
	for _, l := range strings.Split(stdout, "\n") {
		if v, ok := strings.CutPrefix(l, "-- version "); ok {
			v, _, _ = strings.Cut(v, ":")
			planned = append(planned, v)
		}
	}
	require.Equal(t, allVersions(t)[1:], planned, "every version above 14, in order")
	baseline := regexp.MustCompile(`(?m)^CREATE TABLE (\w+) \(`).FindAllStringSubmatch(baselineSQL(t), -1)
	require.NotEmpty(t, baseline)
	for _, m := range baseline {
		require.NotRegexp(t, `(?i)CREATE TABLE\s+(IF NOT EXISTS\s+)?[`+"`"+`"]?`+m[1]+`\b`, stdout, "the baseline's table %s is not created again", m[1])
	}
}

func TestPlanHead(t *testing.T) {
	require.Equal(t, expand(t, "-- current version {head}, head {head}: nothing to apply\n"), runUnchanged(t, headDB(t), "plan", exitOK))
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{name: "no command", args: nil, want: "migrate: no command"},
		{name: "unknown command", args: []string{"frobnicate"}, want: `migrate: unknown command "frobnicate"`},
		{name: "unknown flag", args: []string{"up", "-bogus"}, want: "flag provided but not defined: -bogus"},
		{name: "flag of another command", args: []string{"status", "-fixtures", "x"}, want: "flag provided but not defined: -fixtures"},
		{name: "missing -db", args: []string{"status"}, want: "-db is required"},
		{name: "stray argument", args: []string{"lint", "extra"}, want: `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, tt.args...)
			require.Equal(t, 2, code)
			require.Empty(t, stdout)
			require.Contains(t, stderr, tt.want)
			require.Contains(t, stderr, "usage: migrate")
		})
	}
}

func TestHelp(t *testing.T) {
	code, stdout, _ := runCmd(t, "help")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "usage: migrate <command>")
	code, _, stderr := runCmd(t, "up", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, stderr, "usage: migrate up -db FILE")
}

func TestFailureLeavesDatabaseUnchanged(t *testing.T) {
	tests := []struct {
		name string
		db   func(t *testing.T) string
		want string // in the error line
	}{
		{
			name: "newer database (user_version after head)",
			db:   headWith("PRAGMA user_version = {next}"),
			want: "database is newer than this code",
		},
		{
			name: "newer database (schema_revision records the version after head)",
			db:   headWithFuture(),
			want: "it records version {next}",
		},
		{
			name: "unrelated tables",
			db: func(t *testing.T) string {
				return newDB(t, "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)", "INSERT INTO notes (body) VALUES ('x')")
			},
			want: "no recognisable schema history",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.db(t)
			before := snapshot(t, filepath.Dir(path))
			for _, cmd := range []string{"up", "status", "plan"} {
				code, stdout, stderr := runCmd(t, cmd, "-db", path)
				require.Equal(t, exitError, code, cmd)
				require.Empty(t, stdout, cmd)
				require.True(t, strings.HasPrefix(stderr, "migrate: "+cmd+": "), stderr)
				require.Contains(t, stderr, expand(t, tt.want))
				require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
				require.Equal(t, before, snapshot(t, filepath.Dir(path)), "%s changed the database", cmd)
			}
		})
	}
}

func TestLintRealDirectory(t *testing.T) {
	code, stdout, stderr := runCmd(t, "lint")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, fmt.Sprintf("lint: %d file(s), 0 finding(s), 0 blocking\n", len(allVersions(t))), stdout)

	// The same through -dir, from the files on disk.
	code, stdout, stderr = runCmd(t, "lint", "-dir", filepath.Join("..", "..", "schema", "migrations"))
	require.Equal(t, 0, code, stderr)
	require.Equal(t, fmt.Sprintf("lint: %d file(s), 0 finding(s), 0 blocking\n", len(allVersions(t))), stdout)
}

// sumFS returns a directory holding files and an atlas.sum over them.
var sumFS = migrationtest.SumFS

func TestLintFindings(t *testing.T) {
	// The session rebuilds start from session as head holds it, so that
	// they keep every column, constraint and index a later version adds:
	// each changes only what its case is about.
	session := migrationtest.HeadTable(t, "session")
	device := session.Def("device_id")
	require.Equal(t, "device_id INTEGER NOT NULL CHECK (device_id >= 0)", device, "the column the cases change, as version 14 defines it")
	// edit returns session's definitions with device_id's replaced by to
	// (none when to is ""), and each other definition passed through
	// other.
	edit := func(to string, other func(string) string) []string {
		var defs []string
		for _, d := range session.Defs {
			switch {
			case d == device && to == "":
			case d == device:
				defs = append(defs, to)
			default:
				defs = append(defs, other(d))
			}
		}
		return defs
	}
	same := func(d string) string { return d }
	// rebuild returns a migration rebuilding session as SQLite changes a
	// table, its copy defined by defs and filled by insert ("{columns}"
	// standing for the columns copied, all of head's but except).
	rebuild := func(defs []string, insert string, except ...string) string {
		stmts := []string{
			migrationtest.Create("new_session", defs),
			strings.ReplaceAll(insert, "{columns}", session.ColumnList(except...)),
			"DROP TABLE session",
			"ALTER TABLE new_session RENAME TO session",
		}
		return strings.Join(append(stmts, session.Objects...), ";\n") + ";\n"
	}
	const copyAll = "INSERT INTO new_session SELECT {columns} FROM session"
	tests := []struct {
		name  string
		fsys  func(t *testing.T) fstest.MapFS
		lines []string // printed findings, in order
		fails bool
	}{
		{
			name: "drop table",
			fsys: func(t *testing.T) fstest.MapFS {
				return withFiles(t, map[string]string{"{next}_drop_session.sql": "DROP TABLE session;\n"})
			},
			lines: []string{`{next} {next}_drop_session.sql: destructive: Dropping table "session" [DS102, line 1]`},
			fails: true,
		},
		{
			name: "drop column",
			fsys: func(t *testing.T) fstest.MapFS {
				return withFiles(t, map[string]string{"{next}_drop_sealed.sql": "-- no longer needed\nALTER TABLE identity_pin DROP COLUMN sealed;\n"})
			},
			lines: []string{`{next} {next}_drop_sealed.sql: destructive: Dropping non-virtual column "sealed" [DS103, line 2]`},
			fails: true,
		},
		{
			name: "rename column",
			fsys: func(t *testing.T) fstest.MapFS {
				return withFiles(t, map[string]string{"{next}_rename.sql": "ALTER TABLE session RENAME COLUMN sealed TO sealed_v2;\n"})
			},
			lines: []string{`{next} {next}_rename.sql: incompatible: Renaming column "sealed" to "sealed_v2" [BC102, line 1]`},
			fails: true,
		},
		{
			name: "rename table",
			fsys: func(t *testing.T) fstest.MapFS {
				return withFiles(t, map[string]string{"{next}_rename.sql": "ALTER TABLE session RENAME TO ratchet_session;\n"})
			},
			lines: []string{`{next} {next}_rename.sql: incompatible: Renaming table "session" to "ratchet_session" [BC101, line 1]`},
			fails: true,
		},
		{
			name: "unique index",
			fsys: func(t *testing.T) fstest.MapFS {
				return withFiles(t, map[string]string{"{next}_unique.sql": "CREATE UNIQUE INDEX storage_key_created ON storage_key (created_at);\n"})
			},
			lines: []string{`{next} {next}_unique.sql: data_depend: Adding a unique index "storage_key_created" on table "storage_key" might fail in case column "created_at" contains duplicate entries [MF101, line 1]`},
			fails: true,
		},
		{
			name: "table rebuild dropping a column",
			fsys: func(t *testing.T) fstest.MapFS {
				noDevice := edit("", func(d string) string {
					return strings.Replace(d, "PRIMARY KEY (user_id, device_id)", "PRIMARY KEY (user_id)", 1)
				})
				return withFiles(t, map[string]string{"{next}_rebuild.sql": rebuild(noDevice, copyAll, "device_id")})
			},
			lines: []string{`{next} {next}_rebuild.sql: destructive: Dropping non-virtual column "device_id" [DS103, line 1]`},
			fails: true,
		},
		{
			name: "table rebuild keeping every column and constraint",
			fsys: func(t *testing.T) fstest.MapFS {
				return withFiles(t, map[string]string{"{next}_rebuild.sql": rebuild(session.Defs, copyAll)})
			},
		},
		{
			name: "table rebuild losing a CHECK",
			fsys: func(t *testing.T) fstest.MapFS {
				unchecked := edit("device_id INTEGER NOT NULL", same)
				return withFiles(t, map[string]string{"{next}_rebuild.sql": rebuild(unchecked, copyAll)})
			},
			lines: []string{`{next} {next}_rebuild.sql: schemaloss: table "session" loses CHECK (device_id >= 0) [SL101, line 1]`},
			fails: true,
		},
		{
			name: "table rebuild losing a UNIQUE constraint and an index",
			fsys: func(t *testing.T) fstest.MapFS {
				// The pending table as versions 14 and 15 leave it: a fact
				// of those versions, rebuilt by a version 16 above them.
				return throughWith(t, "15", map[string]string{"16_rebuild.sql": `CREATE TABLE new_pending_outbound_message (
  sequence            INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  recipient_user_id   TEXT    NOT NULL,
  recipient_device_id INTEGER NOT NULL CHECK (recipient_device_id >= 0),
  logical_id          BLOB    NOT NULL CHECK (length(logical_id) = 16),
  sealed              BLOB    NOT NULL
);
INSERT INTO new_pending_outbound_message SELECT * FROM pending_outbound_message;
DROP TABLE pending_outbound_message;
ALTER TABLE new_pending_outbound_message RENAME TO pending_outbound_message;
`})
			},
			lines: []string{
				`16 16_rebuild.sql: schemaloss: table "pending_outbound_message" loses UNIQUE (recipient_user_id, recipient_device_id, logical_id) [SL102, line 1]`,
				`16 16_rebuild.sql: schemaloss: table "pending_outbound_message" loses index "pending_outbound_message_recipient" on (recipient_user_id, recipient_device_id, sequence) [SL103, line 1]`,
			},
			fails: true,
		},
		{
			name: "table rebuild copying some rows",
			fsys: func(t *testing.T) fstest.MapFS {
				return withFiles(t, map[string]string{"{next}_rebuild.sql": rebuild(session.Defs, "INSERT INTO new_session SELECT {columns}\n  FROM session WHERE device_id < 100")})
			},
			lines: []string{`{next} {next}_rebuild.sql: schemaloss: rows of "session" are copied with a WHERE: the rows it does not select are lost when "session" is dropped [SL106, line 2]`},
			fails: true,
		},
		{
			name: "table rebuild copying with OR IGNORE",
			fsys: func(t *testing.T) fstest.MapFS {
				return withFiles(t, map[string]string{"{next}_rebuild.sql": rebuild(session.Defs, "INSERT OR IGNORE INTO new_session SELECT {columns} FROM session")})
			},
			lines: []string{`{next} {next}_rebuild.sql: schemaloss: rows of "session" are copied with INSERT OR IGNORE: a row the new table refuses is lost when "session" is dropped [SL106, line 2]`},
			fails: true,
		},
		{
			name: "a filtered copy into a side table is no finding",
			fsys: func(t *testing.T) fstest.MapFS {
				return withFiles(t, map[string]string{"{next}_copy.sql": "CREATE TABLE session_archive (user_id TEXT NOT NULL, device_id INTEGER NOT NULL);\nINSERT INTO session_archive SELECT user_id, device_id FROM session WHERE device_id > 1;\n"})
			},
		},
		{
			name: "table rebuild changing a column's type",
			fsys: func(t *testing.T) fstest.MapFS {
				asText := edit("device_id TEXT NOT NULL CHECK (device_id >= 0)", same)
				return withFiles(t, map[string]string{"{next}_rebuild.sql": rebuild(asText, copyAll)})
			},
			lines: []string{`{next} {next}_rebuild.sql: schemaloss: column "device_id" of table "session" changes type from INTEGER NOT NULL to TEXT NOT NULL [SL105, line 1]`},
			fails: true,
		},
		{
			name: "new index and table",
			fsys: func(t *testing.T) fstest.MapFS {
				return withFiles(t, map[string]string{"{next}_more.sql": "CREATE TABLE note (id INTEGER PRIMARY KEY);\nCREATE INDEX session_device ON session (device_id);\nALTER TABLE session ADD COLUMN note TEXT;\n"})
			},
		},
		{
			name: "finding in the frozen baseline is informational",
			fsys: func(t *testing.T) fstest.MapFS {
				return sumFS(t, map[string]string{
					"13_old.sql":      "CREATE TABLE legacy (x INTEGER);\n",
					"14_baseline.sql": "DROP TABLE legacy;\nCREATE TABLE session (user_id TEXT);\n",
					"15_index.sql":    "CREATE INDEX session_user ON session (user_id);\n",
				})
			},
			lines: []string{`14 14_baseline.sql: destructive: Dropping table "legacy" [DS102, line 1] (informational: version 14 is the frozen baseline)`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := migration.New(tt.fsys(t), ".")
			require.NoError(t, err)
			var out bytes.Buffer
			err = lintDir(context.Background(), m, nil, "", &out)
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			require.NotEmpty(t, lines)
			summary := lines[len(lines)-1]
			require.True(t, strings.HasPrefix(summary, "lint: "), summary)
			require.Equal(t, expandAll(t, tt.lines), nilIfEmpty(lines[:len(lines)-1]))
			if tt.fails {
				require.Error(t, err)
				require.Contains(t, err.Error(), "in versions above 14")
			} else {
				require.NoError(t, err)
			}
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// writeDir writes fsys to a new temporary directory.
func writeDir(t *testing.T, fsys fstest.MapFS) string {
	t.Helper()
	dir := t.TempDir()
	for n, f := range fsys {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), f.Data, 0o644))
	}
	return dir
}

func TestLintCommandFinding(t *testing.T) {
	dir := writeDir(t, withFiles(t, map[string]string{"{next}_drop_session.sql": "DROP TABLE session;\n"}))
	code, stdout, stderr := runCmd(t, "lint", "-dir", dir)
	require.Equal(t, 1, code)
	require.Contains(t, stdout, expand(t, `{next} {next}_drop_session.sql: destructive: Dropping table "session"`))
	require.Contains(t, stdout, expand(t, `{next} {next}_drop_session.sql: queryplans: query GetSession (queries/local_state.sql) gets a worse plan: it no longer prepares (no such table: session)`))
	findings := strings.Count(stdout, expand(t, "\n{next} {next}_drop_session.sql: ")) + 1
	require.Equal(t, fmt.Sprintf("migrate: lint: %d finding(s) in versions above 14\n", findings), stderr)
}

func TestLintCommandTamperedDirectory(t *testing.T) {
	fsys := withFiles(t, nil)
	fsys[nextFile(t, "unsummed")] = &fstest.MapFile{Data: []byte("DROP TABLE session;\n")}
	code, stdout, stderr := runCmd(t, "lint", "-dir", writeDir(t, fsys))
	require.Equal(t, exitError, code)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "does not match atlas.sum")
	require.Contains(t, stderr, nextFile(t, "unsummed")+" added")
}

func TestHash(t *testing.T) {
	real := filepath.Join("..", "..", "schema", "migrations")
	want, err := os.ReadFile(filepath.Join(real, migrate.HashFileName))
	require.NoError(t, err)

	fsys := withFiles(t, nil)
	delete(fsys, migrate.HashFileName)
	dir := writeDir(t, fsys)

	code, stdout, stderr := runCmd(t, "hash", "-dir", dir)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, fmt.Sprintf("wrote %s/atlas.sum (%d files)\n", dir, len(allVersions(t))), stdout)
	got, err := os.ReadFile(filepath.Join(dir, migrate.HashFileName))
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "same atlas.sum as the one checked in")

	code, stdout, _ = runCmd(t, "hash", "-dir", dir)
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "is up to date")

	// A new migration: hash makes the directory valid for the runner again.
	require.NoError(t, os.WriteFile(filepath.Join(dir, nextFile(t, "more")), []byte("CREATE TABLE note (id INTEGER PRIMARY KEY);\n"), 0o644))
	_, err = migration.New(os.DirFS(dir), ".")
	require.ErrorIs(t, err, schema.ErrChecksum)
	code, _, stderr = runCmd(t, "hash", "-dir", dir)
	require.Equal(t, 0, code, stderr)
	m, err := migration.New(os.DirFS(dir), ".")
	require.NoError(t, err)
	require.Equal(t, nextVersion(t), m.Head())

	// A file the runner refuses: nothing is written.
	before := snapshot(t, dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "next_bad.sql"), []byte("SELECT 1;\n"), 0o644))
	code, _, stderr = runCmd(t, "hash", "-dir", dir)
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, "not written")
	after := snapshot(t, dir)
	require.Equal(t, before[migrate.HashFileName], after[migrate.HashFileName])
}

func TestHashRefusesVersionsOfDifferentWidths(t *testing.T) {
	dir := writeDir(t, fstest.MapFS{
		"9_a.sql":  {Data: []byte("CREATE TABLE a (x INTEGER);\n")},
		"10_b.sql": {Data: []byte("CREATE TABLE b (x INTEGER);\n")},
	})
	code, _, stderr := runCmd(t, "hash", "-dir", dir)
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, "differ in width")
	require.NoFileExists(t, filepath.Join(dir, migrate.HashFileName))
}

func TestHashMissingDirectory(t *testing.T) {
	code, _, stderr := runCmd(t, "hash", "-dir", filepath.Join(t.TempDir(), "nope"))
	require.Equal(t, exitError, code)
	require.True(t, strings.HasPrefix(stderr, "migrate: hash: "), stderr)
}

// TestLintQueryPlans plans the store's queries before and after a file:
// dropping the index the per-recipient page walks is a finding naming the
// query and both plans; a new index no query loses by is none.
func TestLintQueryPlans(t *testing.T) {
	queries, err := pipeline.ReadQueries(filepath.Join(repo, "internal", "db"), "queries")
	require.NoError(t, err)
	lintLines := func(t *testing.T, extra map[string]string) ([]string, error) {
		m, err := migration.New(withFiles(t, extra), ".")
		require.NoError(t, err)
		var out bytes.Buffer
		err = lintDir(context.Background(), m, queries, "", &out)
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		return lines[:len(lines)-1], err
	}

	lines, err := lintLines(t, map[string]string{"{next}_more.sql": "CREATE TABLE note (id INTEGER PRIMARY KEY);\nCREATE INDEX session_device ON session (device_id);\n"})
	require.NoError(t, err)
	require.Empty(t, lines)

	lines, err = lintLines(t, map[string]string{"{next}_drop_index.sql": "DROP INDEX pending_outbound_message_recipient;\n"})
	require.Error(t, err)
	var page string
	for _, l := range lines {
		require.Contains(t, l, expand(t, "{next} {next}_drop_index.sql: queryplans: query "))
		if strings.Contains(l, "query PagePendingOutboundForRecipient ") {
			page = l
		}
	}
	require.NotEmpty(t, page, "%q", lines)
	require.Contains(t, page, "gets a worse plan: it sorts in a temporary b-tree, index pending_outbound_message_recipient is gone")
	require.Contains(t, page, "before: [SEARCH pending_outbound_message USING INDEX pending_outbound_message_recipient (recipient_user_id=? AND recipient_device_id=? AND sequence>?)]")
	require.Contains(t, page, "after: [SEARCH pending_outbound_message USING INDEX sqlite_autoindex_pending_outbound_message_1 (recipient_user_id=? AND recipient_device_id=?); USE TEMP B-TREE FOR ORDER BY]")
	require.Contains(t, page, "[QP101, line 1]")
}
