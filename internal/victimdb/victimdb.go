// Package victimdb gives tests a database file that code under test must
// not reach: a confined connection (pipeline.OpenConfined) replaying a
// hostile migration or fixture file that ATTACHes it, drops its table or
// copies itself beside it. Only tests import it.
package victimdb

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/mattn/go-sqlite3" // the sqlite3 driver
	"github.com/stretchr/testify/require"
)

// New creates victim.db, alone in a new temporary directory of tb, with
// one table peers holding one row, and returns its path.
func New(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "victim.db")
	conn, err := sql.Open("sqlite3", path)
	require.NoError(tb, err)
	defer conn.Close()
	_, err = conn.Exec("CREATE TABLE peers (x INTEGER); INSERT INTO peers VALUES (1)")
	require.NoError(tb, err)
	require.NoError(tb, conn.Close())
	return path
}

// RequireUntouched fails tb unless the database at path (made by New)
// still holds its table and row and nothing was created beside it.
func RequireUntouched(tb testing.TB, path string) {
	tb.Helper()
	es, err := os.ReadDir(filepath.Dir(path))
	require.NoError(tb, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	require.Equal(tb, []string{filepath.Base(path)}, names, "nothing created beside the other database")
	conn, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	require.NoError(tb, err)
	defer conn.Close()
	var n int
	require.NoError(tb, conn.QueryRow("SELECT count(*) FROM peers").Scan(&n))
	require.Equal(tb, 1, n, "the other database is untouched")
}
