package migrationtest_test

import (
	"context"
	"database/sql"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"ariga.io/atlas/sql/migrate"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/testkit/migrationtest"
	"github.com/securemsg/storage/schema"
)

var realDir = filepath.Join("..", "..", "..", "schema", "migrations")

// TestSumFSMatchesCheckedInSum: over the real migration files SumFS
// writes the atlas.sum checked in beside them.
func TestSumFSMatchesCheckedInSum(t *testing.T) {
	files := map[string]string{}
	entries, err := os.ReadDir(realDir)
	require.NoError(t, err)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".sql") {
			b, err := os.ReadFile(filepath.Join(realDir, e.Name()))
			require.NoError(t, err)
			files[e.Name()] = string(b)
		}
	}
	require.Len(t, files, len(migrationtest.Default(t).Versions()), "every version's file")
	want, err := os.ReadFile(filepath.Join(realDir, migrate.HashFileName))
	require.NoError(t, err)

	fsys := migrationtest.SumFS(t, files)
	require.Len(t, fsys, len(files)+1, "the files and atlas.sum, nothing else")
	require.Equal(t, string(want), string(fsys[migrate.HashFileName].Data))
	for n, s := range files {
		require.Equal(t, s, string(fsys[n].Data), n)
	}
}

// TestSumFSCoversEveryFile: the sum is over names and contents, so an
// edit or a file added after SumFS is a checksum mismatch.
func TestSumFSCoversEveryFile(t *testing.T) {
	files := map[string]string{"1_a.sql": "CREATE TABLE a (x INTEGER);\n", "2_b.sql": "CREATE TABLE b (y INTEGER);\n"}
	tests := []struct {
		name   string
		change func(d *migrate.MemDir) error
		want   error
	}{
		{"unchanged", func(*migrate.MemDir) error { return nil }, nil},
		{"edited", func(d *migrate.MemDir) error { return d.WriteFile("2_b.sql", []byte("CREATE TABLE b (z INTEGER);\n")) }, migrate.ErrChecksumMismatch},
		{"added", func(d *migrate.MemDir) error { return d.WriteFile("3_c.sql", []byte("CREATE TABLE c (x INTEGER);\n")) }, migrate.ErrChecksumMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &migrate.MemDir{}
			for n, f := range migrationtest.SumFS(t, files) {
				require.NoError(t, d.WriteFile(n, f.Data))
			}
			require.NoError(t, tt.change(d))
			err := migrate.Validate(d)
			if tt.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tt.want)
			}
		})
	}
}

// TestHeadAndNext: the head is the embedded directory's newest version,
// Next the one after it, and Through a directory that stops at a version
// with the same history hashes as the whole directory's.
func TestHeadAndNext(t *testing.T) {
	m := migrationtest.Default(t)
	versions := m.Versions()
	require.Equal(t, versions[len(versions)-1], migrationtest.Head(t))
	require.Equal(t, strconv.Itoa(migrationtest.HeadNumber(t)+1), migrationtest.Next(t))
	require.Equal(t, migrationtest.Next(t)+"_x.sql", migrationtest.NextFile(t, "x"))
	require.Contains(t, migrationtest.FutureRevision(t), "'"+migrationtest.Next(t)+"', 'future'")

	whole, err := m.Dir().Checksum()
	require.NoError(t, err)
	for i, v := range versions {
		through := migrationtest.Through(t, v)
		require.Equal(t, versions[:i+1], through.Versions(), v)
		sum, err := through.Dir().Checksum()
		require.NoError(t, err)
		for _, f := range versions[:i+1] {
			want, err := whole.SumByName(fileOf(t, m, f))
			require.NoError(t, err)
			got, err := sum.SumByName(fileOf(t, m, f))
			require.NoError(t, err)
			require.Equal(t, want, got, "version %s's hash through %s", f, v)
		}
	}
}

// fileOf returns the name of m's file of version v.
func fileOf(t *testing.T, m interface{ Dir() migrate.Dir }, v string) string {
	t.Helper()
	files, err := m.Dir().Files()
	require.NoError(t, err)
	for _, f := range files {
		if f.Version() == v {
			return f.Name()
		}
	}
	t.Fatalf("no file of version %s", v)
	return ""
}

func TestBaselineSQL(t *testing.T) {
	want, err := os.ReadFile(filepath.Join(realDir, "14_baseline.sql"))
	require.NoError(t, err)
	require.Equal(t, string(want), migrationtest.BaselineSQL(t))
	embedded, err := fs.ReadFile(schema.Migrations(), schema.MigrationsDir+"/14_baseline.sql")
	require.NoError(t, err)
	require.Equal(t, string(embedded), migrationtest.BaselineSQL(t))
}

// TestHeadTable: every table at head, created again from its Defs under
// another name, has the same columns (name, type, NOT NULL, default, key
// position) and the same CHECKs; Objects are its indexes and triggers.
func TestHeadTable(t *testing.T) {
	conn, err := sql.Open(sqlitedriver.Name, "file:"+filepath.Join(t.TempDir(), "head.db"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = migrationtest.Default(t).Up(context.Background(), conn)
	require.NoError(t, err)
	info := func(table string) [][]any {
		rows, err := conn.Query(`SELECT name, type, "notnull", coalesce(dflt_value, 'NULL'), pk FROM pragma_table_info(?) ORDER BY cid`, table)
		require.NoError(t, err)
		defer rows.Close()
		var out [][]any
		for rows.Next() {
			var name, typ, dflt string
			var notnull, pk int
			require.NoError(t, rows.Scan(&name, &typ, &notnull, &dflt, &pk))
			out = append(out, []any{name, typ, notnull, dflt, pk})
		}
		require.NoError(t, rows.Err())
		return out
	}
	rows, err := conn.Query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'`)
	require.NoError(t, err)
	var tables []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		tables = append(tables, n)
	}
	require.NoError(t, rows.Close())
	require.Contains(t, tables, "session")
	for _, name := range tables {
		table := migrationtest.HeadTable(t, name)
		require.Equal(t, migrationtest.TableIn(t, conn, name), table, name)
		_, err := conn.Exec(migrationtest.Create("copy_of_"+name, table.Defs))
		require.NoError(t, err, name)
		require.Equal(t, info(name), info("copy_of_"+name), name)
		require.Equal(t, table.Columns, migrationtest.TableIn(t, conn, "copy_of_"+name).Columns)
		require.Equal(t, strings.Count(strings.ToUpper(strings.Join(table.Defs, ",")), "CHECK"),
			strings.Count(strings.ToUpper(storedSQL(t, conn, name)), "CHECK"), name)
	}
	session := migrationtest.HeadTable(t, "session")
	require.Equal(t, []string{"user_id", "device_id", "sealed"}, session.Columns[:3])
	require.Equal(t, "device_id INTEGER NOT NULL CHECK (device_id >= 0)", session.Def("device_id"))
	require.Equal(t, "PRIMARY KEY (user_id, device_id)", session.Defs[len(session.Defs)-1])
	require.True(t, session.IsColumn("sealed BLOB NOT NULL"))
	require.False(t, session.IsColumn("PRIMARY KEY (user_id, device_id)"))
	withNote := session.WithColumn("note TEXT")
	require.Equal(t, "note TEXT", withNote[len(session.Columns)])
	require.Equal(t, "user_id, sealed", migrationtest.HeadTable(t, "identity_pin").ColumnList("device_id"))
	require.Equal(t, []string{"CREATE INDEX pending_outbound_message_recipient\n  ON pending_outbound_message (recipient_user_id, recipient_device_id, sequence)"},
		migrationtest.HeadTable(t, "pending_outbound_message").Objects[:1])
}

func storedSQL(t *testing.T, conn *sql.DB, table string) string {
	t.Helper()
	var s string
	require.NoError(t, conn.QueryRow(`SELECT sql FROM sqlite_master WHERE name = ?`, table).Scan(&s))
	return s
}

// TestTableInDefs: comments go, quotes and parentheses keep their commas
// and blanks, a column added by ALTER TABLE is a definition like the
// others.
func TestTableInDefs(t *testing.T) {
	conn, err := sql.Open(sqlitedriver.Name, "file:"+filepath.Join(t.TempDir(), "t.db"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Exec(`CREATE TABLE "odd, name" ( -- a comment, with a comma
  a   TEXT DEFAULT 'x,  y' /* another, ( */ NOT NULL,
  "b, c" INTEGER CHECK (length("b, c") IN (1,  2)),
  PRIMARY KEY (a)
);
ALTER TABLE "odd, name" ADD COLUMN d BLOB;
CREATE INDEX odd_d ON "odd, name" (d);`)
	require.NoError(t, err)
	table := migrationtest.TableIn(t, conn, "odd, name")
	require.Equal(t, []string{"a", "b, c", "d"}, table.Columns)
	require.Contains(t, table.Defs, "a TEXT DEFAULT 'x,  y' NOT NULL")
	require.Contains(t, table.Defs, `"b, c" INTEGER CHECK (length("b, c") IN (1, 2))`)
	require.Contains(t, table.Defs, "d BLOB")
	require.Equal(t, `"b, c" INTEGER CHECK (length("b, c") IN (1, 2))`, table.Def("b, c"))
	require.Equal(t, []string{`CREATE INDEX odd_d ON "odd, name" (d)`}, table.Objects)
}
