package migrationtest_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"ariga.io/atlas/sql/migrate"
	"github.com/stretchr/testify/require"

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
	embedded, err := fs.ReadFile(schema.Migrations, schema.MigrationsDir+"/14_baseline.sql")
	require.NoError(t, err)
	require.Equal(t, string(embedded), migrationtest.BaselineSQL(t))
}
