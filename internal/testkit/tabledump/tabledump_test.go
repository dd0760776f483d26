package tabledump_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/testkit/tabledump"
)

// mustOpen returns a new database file in tb.TempDir() holding a table
// with a row of every storage class.
func mustOpen(tb testing.TB) *sql.DB {
	tb.Helper()
	db, err := sql.Open(sqlitedriver.Name, "file:"+filepath.Join(tb.TempDir(), "dump.db"))
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, db.Close()) })
	exec(tb, db,
		`CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, v ANY, note TEXT) STRICT`,
		`INSERT INTO t (v, note) VALUES (1, 'int'), ('1', 'text'), (x'31', 'blob'), (1.5, 'real'), (NULL, NULL)`,
		`CREATE TABLE "odd ""name""" (x)`,
		`INSERT INTO "odd ""name""" VALUES ('q')`,
	)
	return db
}

func exec(tb testing.TB, db *sql.DB, stmts ...string) {
	tb.Helper()
	for _, s := range stmts {
		_, err := db.Exec(s)
		require.NoError(tb, err, s)
	}
}

func TestRowsRendersEveryStorageClassApart(t *testing.T) {
	db := mustOpen(t)
	require.Equal(t, []string{
		`id=1 v=1 note="int"`,
		`id=2 v="1" note="text"`,
		`id=3 v=x'31' note="blob"`,
		`id=4 v=1.5 note="real"`,
		`id=5 v=NULL note=NULL`,
	}, tabledump.Rows(t, db, "t"))
	require.Equal(t, []string{`x="q"`}, tabledump.Rows(t, db, `odd "name"`), "a quote in a table name is doubled")
}

func TestRowsAreSorted(t *testing.T) {
	a, b := mustOpen(t), mustOpen(t)
	exec(t, a, `CREATE TABLE n (x)`, `INSERT INTO n VALUES ('b'), ('a'), ('c')`)
	exec(t, b, `CREATE TABLE n (x)`, `INSERT INTO n VALUES ('c'), ('b'), ('a')`)
	require.Equal(t, []string{`x="a"`, `x="b"`, `x="c"`}, tabledump.Rows(t, a, "n"))
	require.Equal(t, tabledump.Tables(t, a), tabledump.Tables(t, b), "the order rows were written in does not matter")
}

func TestTablesSeesEveryChange(t *testing.T) {
	tests := []struct {
		name   string
		change string
	}{
		{"value of the same storage class", `UPDATE t SET note = 'INT' WHERE id = 1`},
		{"integer to text", `UPDATE t SET v = '1' WHERE id = 1`},
		{"text to blob", `UPDATE t SET v = x'31' WHERE id = 2`},
		{"NULL to empty text", `UPDATE t SET note = '' WHERE id = 5`},
		{"row added", `INSERT INTO t (v) VALUES (NULL)`},
		{"row deleted", `DELETE FROM t WHERE id = 3`},
		{"row of a quoted table", `UPDATE "odd ""name""" SET x = 'r'`},
		{"sqlite_sequence only", `UPDATE sqlite_sequence SET seq = 99 WHERE name = 't'`},
		{"schema only", `CREATE INDEX t_note ON t (note)`},
		{"empty table added", `CREATE TABLE empty (x)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := mustOpen(t)
			before := tabledump.Tables(t, db)
			require.Equal(t, before, tabledump.Tables(t, db), "a dump is stable")
			exec(t, db, tt.change)
			require.NotEqual(t, before, tabledump.Tables(t, db))
		})
	}
}

func TestTablesNamesEveryTable(t *testing.T) {
	got := tabledump.Tables(t, mustOpen(t))
	var names []string
	for n := range got {
		names = append(names, n)
	}
	require.ElementsMatch(t, []string{"sqlite_master", "sqlite_sequence", "t", `odd "name"`}, names)
	require.Len(t, got["sqlite_master"], 3, "one row per table, sqlite_sequence included")
}
