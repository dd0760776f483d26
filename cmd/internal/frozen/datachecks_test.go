package frozen

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/fixtures/version14"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/testkit/migrationtest"
)

// withNext returns the Migrator of the embedded directory with a next
// version (head+1, migrationtest.NextFile) of sql and, when decl is not
// "", its declaration file.
func withNext(t *testing.T, sql, decl string) *migration.Migrator {
	t.Helper()
	name := migrationtest.NextFile(t, "change")
	fsys := migrationtest.WithMigrations(t, map[string]string{name: sql})
	if decl != "" {
		fsys[strings.TrimSuffix(name, ".sql")+DeclaredSuffix] = &fstest.MapFile{Data: []byte(decl)}
	}
	m, err := migration.New(fsys, ".")
	require.NoError(t, err)
	return m
}

// sessionRebuild returns a migration rebuilding session as head defines
// it (every column, constraint and index kept) with a new column,
// keeping its rows.
func sessionRebuild(t *testing.T) string {
	t.Helper()
	return rebuildAtHead(t, "session", "created_at INTEGER NOT NULL DEFAULT 0")
}

// rebuildAtHead returns a migration rebuilding table as SQLite changes a
// table (create new_T, copy, drop, rename, its indexes and triggers
// created again), from table as head defines it, with column definitions
// added after its last column.
func rebuildAtHead(t *testing.T, table string, add ...string) string {
	t.Helper()
	head := migrationtest.HeadTable(t, table)
	columns := head.ColumnList()
	for _, a := range add {
		head.Defs = head.WithColumn(a)
	}
	return strings.Join(append([]string{
		migrationtest.Create("new_"+table, head.Defs),
		"INSERT INTO new_" + table + " (" + columns + ") SELECT " + columns + " FROM " + table,
		"DROP TABLE " + table,
		"ALTER TABLE new_" + table + " RENAME TO " + table,
	}, head.Objects...), ";\n") + ";\n"
}

// lastSeenDeclared declares session.last_seen of both version-14 session
// rows, as the backfill below writes them.
const lastSeenDeclared = `{"fixtures": {"14": {"session": [
  {"key": {"user_id": "bob", "device_id": 1}, "set": {"last_seen": 10}},
  {"key": {"user_id": "bob", "device_id": 2}, "set": {"last_seen": 20}}
]}}}`

const backfill = "ALTER TABLE session ADD COLUMN last_seen INTEGER;\nUPDATE session SET last_seen = device_id * 10;\n"

// TestProveSchemaChanges proves the version-14 fixture at a next head
// (head+1; "{next}" in an expected error) of each kind of change: what keeps the data passes, an undeclared change
// to it fails naming the table, row and column, and a declared one passes
// only with the values it declares.
func TestProveSchemaChanges(t *testing.T) {
	for _, tt := range []struct {
		name, sql, decl string
		fail            string // "" when the proof passes; else in the failed check's error
		line            int    // the failed check's line in fixture.sql
	}{
		{name: "nullable column", sql: "ALTER TABLE session ADD COLUMN last_seen INTEGER;\n"},
		{name: "column with a default", sql: "ALTER TABLE session ADD COLUMN flags INTEGER NOT NULL DEFAULT 7;\n"},
		{name: "text default", sql: "ALTER TABLE session ADD COLUMN label TEXT NOT NULL DEFAULT 'none';\n"},
		{name: "table rebuild keeping its rows", sql: sessionRebuild(t)},
		{name: "new table", sql: "CREATE TABLE note (id INTEGER PRIMARY KEY, body TEXT);\nINSERT INTO note (body) VALUES ('seeded');\n"},
		{name: "declared backfill", sql: backfill, decl: lastSeenDeclared},
		{
			name: "undeclared backfill", sql: backfill, line: 100,
			fail: "table session, row (user_id='bob', device_id=1), column last_seen (added): holds 10, not its declared default NULL; no change declared",
		},
		{
			name: "undeclared update of a kept column", sql: "UPDATE storage_key SET created_at = 1;\n", line: 92,
			fail: "table storage_key, row (key_id=1443627214), column created_at: changed from 1700000000 to 1; no change declared",
		},
		{
			name: "declared value differs", sql: backfill, line: 101,
			decl: strings.Replace(lastSeenDeclared, `"last_seen": 20`, `"last_seen": 21`, 1),
			fail: "table session, row (user_id='bob', device_id=2), column last_seen: 20 after the migration, {next}_change.expect.json declares 21",
		},
		{
			name: "rebuild that loses a row", sql: strings.Replace(sessionRebuild(t), "FROM session;", "FROM session WHERE device_id = 1;", 1), line: 101,
			fail: "table session, row (user_id='bob', device_id=2): lost; no change declared",
		},
		{
			name: "declared deletion", sql: "DELETE FROM processed_inbound_message WHERE sender_user_id = 'bob';\n",
			decl: `{"fixtures": {"14": {"processed_inbound_message": [{"key": {"sender_user_id": "bob", "sender_device_id": 1, "logical_id": {"hex": "` + bobProcessed(t) + `"}}, "deleted": true}]}}}`,
		},
		{
			name: "declaration naming a row the fixture lacks", sql: backfill,
			decl: `{"fixtures": {"14": {"session": [{"key": {"user_id": "zed", "device_id": 1}, "set": {"last_seen": 1}}]}}}`,
			fail: "{next}_change.expect.json: fixture 14 holds no session row (user_id='zed', device_id=1)",
		},
		{
			name: "declaration of an unknown field", sql: backfill, decl: `{"fixture": {}}`,
			fail: `{next}_change.expect.json: json: unknown field "fixture"`,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			checks, err := prove(context.Background(), withNext(t, tt.sql, tt.decl), version14.Files(), "14", &out)
			if tt.fail == "" {
				require.NoError(t, err, out.String())
				return
			}
			require.Error(t, err, out.String())
			var failed []Check
			for _, c := range checks {
				if !c.OK {
					failed = append(failed, c)
				}
			}
			require.NotEmpty(t, failed, out.String())
			require.Contains(t, failed[0].Error, strings.ReplaceAll(tt.fail, "{next}", migrationtest.Next(t)))
			if tt.line > 0 {
				require.Equal(t, FixtureFile, failed[0].File)
				require.Equal(t, tt.line, failed[0].Line)
			}
		})
	}
}

// bobProcessed returns the hex logical id of bob's processed inbound
// message in the version-14 fixture.
func bobProcessed(t *testing.T) string {
	for _, l := range strings.Split(string(version14.FixtureSQL()), "\n") {
		names, values, ok := parseInsert(l, "processed_inbound_message")
		if ok && values[0] == "'bob'" {
			require.Equal(t, "logical_id", names[2])
			return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(values[2], "X'"), "'"))
		}
	}
	t.Fatal("no processed message of bob's in the fixture")
	return ""
}

// The data checks on dumps edited by hand: what a migration could do that
// the proof through the store does not reach.
func TestDataChecksDetect(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name, stmt, want string
		rows             bool // checkRowsKept fails, else checkValuesKept
		decl             *expectation
	}{
		{name: "new table", rows: true, stmt: "CREATE TABLE k (v TEXT); INSERT INTO k VALUES ('a')"},
		{name: "dropped column", stmt: "ALTER TABLE processed_inbound_message DROP COLUMN processed_at",
			want: "table processed_inbound_message, column processed_at: dropped with the values of 3 row(s)"},
		{name: "declared dropped column", stmt: "ALTER TABLE processed_inbound_message DROP COLUMN processed_at",
			decl: &expectation{dropped: map[string]string{"processed_inbound_message.processed_at": "16_x.expect.json"}}},
		{name: "dropped table", rows: true, stmt: "DROP TABLE processed_inbound_message",
			want: "table processed_inbound_message: dropped with its 3 row(s)"},
		{name: "added row", rows: true, stmt: "INSERT INTO session (user_id, device_id, sealed) SELECT 'zed', 9, sealed FROM session LIMIT 1",
			want: "table session, row (user_id='zed', device_id=9): added by the migration"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, conn, before, _, _ := migrated(t)
			_, err := conn.ExecContext(ctx, tt.stmt)
			require.NoError(t, err)
			after, err := Dump(ctx, conn)
			require.NoError(t, err)
			e := tt.decl
			if e == nil {
				e = &expectation{}
			}
			check := checkValuesKept
			if tt.rows {
				check = checkRowsKept
			}
			err = check(before, after, e, "14")
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// A table without a primary key has its rows matched by content: a copy
// of a row is a duplicate.
func TestDataChecksDuplicateWithoutKey(t *testing.T) {
	ctx := context.Background()
	_, conn, _, _, _ := migrated(t)
	migrationtest.Exec(t, conn, "CREATE TABLE k (v TEXT)", "INSERT INTO k VALUES ('a'), ('b')")
	before, err := Dump(ctx, conn)
	require.NoError(t, err)
	migrationtest.Exec(t, conn, "INSERT INTO k VALUES ('a')")
	after, err := Dump(ctx, conn)
	require.NoError(t, err)
	require.ErrorContains(t, checkRowsKept(before, after, &expectation{}, "14"), "table k, row (v='a'): 2 copies after the migration")
}

func TestJSONLiteral(t *testing.T) {
	m := withNext(t, backfill, `{"fixtures": {"14": {"session": [{"key": {"user_id": "bob", "device_id": 1},
	  "set": {"a": "it's", "b": 2, "c": 2.0, "d": 1e3, "e": null, "f": {"hex": "00AB"}}}]}}}`)
	files, err := readDeclared(m)
	require.NoError(t, err)
	// Only this test's declaration: the landed ones are the directory's.
	files = slices.DeleteFunc(files, func(f declaredFile) bool { return f.version != migrationtest.Next(t) })
	require.Len(t, files, 1)
	ctx := context.Background()
	_, conn, before, _, _ := migrated(t)
	_ = conn
	e, err := expectationFor(files, versionsAbove(m, "14"), "14", before)
	require.NoError(t, err)
	got := map[string]string{}
	for c, d := range e.set["session"]["'bob'"+keySep+"1"] {
		got[c] = d.value
	}
	require.Equal(t, map[string]string{"a": "'it''s'", "b": "2", "c": "2.0", "d": "1000.0", "e": "NULL", "f": "X'00AB'"}, got)
	// Not applied to a fixture at the next version, nor to another
	// fixture's version.
	e, err = expectationFor(files, nil, migrationtest.Next(t), before)
	require.NoError(t, err)
	require.Empty(t, e.set)
	_ = ctx
}

func TestDeclarationWithoutMigration(t *testing.T) {
	fsys := migrationtest.WithMigrations(t, nil)
	gone := migrationtest.Next(t) + "_gone"
	fsys[gone+DeclaredSuffix] = &fstest.MapFile{Data: []byte(`{"fixtures": {}}`)}
	m, err := migration.New(fsys, ".")
	require.NoError(t, err)
	_, err = readDeclared(m)
	require.ErrorIs(t, err, ErrDeclared)
	require.ErrorContains(t, err, gone+".expect.json declares the changes of "+gone+".sql, which is not in the migration directory")
}

func TestRowLine(t *testing.T) {
	fixture := version14.FixtureSQL()
	require.Equal(t, 101, rowLine(fixture, "session", []string{"user_id", "device_id"}, "'bob'"+keySep+"2"))
	require.Equal(t, 0, rowLine(fixture, "session", []string{"user_id", "device_id"}, "'bob'"+keySep+"3"))
	// Dump.SQL's quoted form.
	frozenSQL := []byte("x\nINSERT INTO \"session\" (\"user_id\", \"device_id\", \"sealed\") VALUES ('it''s, ok', 2, X'00');\n")
	require.Equal(t, 2, rowLine(frozenSQL, "session", []string{"user_id", "device_id"}, "'it''s, ok'"+keySep+"2"))
}
