package frozen

import (
	"context"
	"database/sql"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/testkit/migrationtest"
)

func TestFindOrdersByVersionNumber(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"version9", "version10", "version14", "legacy", "versionX"} {
		require.NoError(t, os.Mkdir(filepath.Join(root, d), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "version15"), nil, 0o644)) // a file, not a fixture
	dirs, err := Find(root)
	require.NoError(t, err)
	var got []string
	for _, d := range dirs {
		got = append(got, d.Version)
		require.Equal(t, filepath.Join(root, "version"+d.Version), d.Path)
	}
	require.Equal(t, []string{"9", "10", "14"}, got)

	_, err = Find(filepath.Join(root, "missing"))
	require.Error(t, err)
}

func TestLiteralKeepsStorageClass(t *testing.T) {
	for _, tt := range []struct {
		v    any
		want string
	}{
		{nil, "NULL"},
		{int64(-7), "-7"},
		{float64(2), "2.0"},
		{1.5, "1.5"},
		{"it's", "'it''s'"},
		{[]byte{0x00, 0xab}, "X'00AB'"},
		{[]byte{}, "X''"},
		{math.Inf(1), "9e999"},
		{math.Inf(-1), "-9e999"},
	} {
		got, err := literal(tt.v)
		require.NoError(t, err, "%#v", tt.v)
		require.Equal(t, tt.want, got, "%#v", tt.v)
	}
}

// A value the driver converted from its declared type would be frozen as
// something else: Dump refuses it, naming the table and column.
func TestDumpRefusesConvertedValues(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name, decl, value string
	}{
		{"datetime", "DATETIME", "'2024-01-02 03:04:05'"},
		{"boolean", "BOOLEAN", "1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := sql.Open("sqlite3", filepath.Join(t.TempDir(), "x.db"))
			require.NoError(t, err)
			defer conn.Close()
			_, err = conn.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v " + tt.decl + "); INSERT INTO t (v) VALUES (" + tt.value + ")")
			require.NoError(t, err)
			_, err = Dump(ctx, conn)
			require.ErrorContains(t, err, "frozen: dump t column v: value of Go type")
		})
	}
}

// Infinity round-trips through the dump: the literal loads as the value.
func TestDumpInfinityLoadsBack(t *testing.T) {
	ctx := context.Background()
	conn, err := sql.Open("sqlite3", filepath.Join(t.TempDir(), "x.db"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v REAL); INSERT INTO t (v) VALUES (9e999), (-9e999)")
	require.NoError(t, err)
	d, err := Dump(ctx, conn)
	require.NoError(t, err)
	require.Equal(t, []string{
		`INSERT INTO "t" ("id", "v") VALUES (1, 9e999);`,
		`INSERT INTO "t" ("id", "v") VALUES (2, -9e999);`,
	}, d.Rows["t"])
	var v float64
	require.NoError(t, conn.QueryRow("SELECT 9e999").Scan(&v))
	require.True(t, math.IsInf(v, 1))
}

// TestProveIsConfined proves a fixture whose fixture.sql attaches another
// database and drops its table: the load check fails with SQLite's
// authorization error, no file appears and the other database keeps its
// table and row.
func TestProveIsConfined(t *testing.T) {
	ctx := context.Background()
	m, err := migration.Default()
	require.NoError(t, err)
	victim := migrationtest.Victim(t)

	fixture := filepath.Join(t.TempDir(), "version15")
	require.NoError(t, os.Mkdir(fixture, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(fixture, ContentsFile), []byte(`{"schema_version": "15"}`), 0o644))
	sqlText := "ATTACH DATABASE '" + victim + "' AS v; DROP TABLE v.peers; DETACH DATABASE v;\nPRAGMA user_version = 15;\n"
	require.NoError(t, os.WriteFile(filepath.Join(fixture, FixtureFile), []byte(sqlText), 0o644))

	checks, err := Prove(ctx, m, fixture, io.Discard)
	require.Error(t, err)
	last := checks[len(checks)-1]
	require.Equal(t, FixtureFile+" loads as a version-15 database", last.Name)
	require.False(t, last.OK)
	require.Contains(t, last.Error, "not authorized")

	migrationtest.RequireVictimUntouched(t, victim)
}
