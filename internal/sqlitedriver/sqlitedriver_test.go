package sqlitedriver_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqlitedriver"
)

func open(t *testing.T, path string) *sql.DB {
	t.Helper()
	conn, err := sql.Open(sqlitedriver.Name, sqlitedriver.StoreDSN(path, 2000))
	require.NoError(t, err)
	conn.SetMaxOpenConns(1)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Each check recognizes its code, as the build's driver reports it, and
// no other.
func TestCodes(t *testing.T) {
	checks := map[string]func(error) bool{
		"notadb": sqlitedriver.IsNotADB, "corrupt": sqlitedriver.IsCorrupt,
		"unique": sqlitedriver.IsUniqueConstraint, "full": sqlitedriver.IsFull,
	}
	tests := []struct {
		name string
		want string // the one check that must match, "" for none
		err  func(t *testing.T) error
	}{
		{name: "not a database", want: "notadb", err: func(t *testing.T) error {
			path := filepath.Join(t.TempDir(), "x.db")
			require.NoError(t, os.WriteFile(path, []byte(strings.Repeat("not a database ", 512)), 0o600))
			_, err := open(t, path).Exec("SELECT count(*) FROM sqlite_master")
			return err
		}},
		{name: "unparsable schema", want: "corrupt", err: func(t *testing.T) error {
			path := filepath.Join(t.TempDir(), "x.db")
			conn := open(t, path)
			_, err := conn.Exec("CREATE TABLE t (x)")
			require.NoError(t, err)
			_, err = conn.Exec("PRAGMA writable_schema = ON")
			require.NoError(t, err)
			_, err = conn.Exec("UPDATE sqlite_master SET sql = 'CREATE TABLE t (' WHERE name = 't'")
			require.NoError(t, err)
			require.NoError(t, conn.Close())
			_, err = open(t, path).Exec("SELECT count(*) FROM t")
			return err
		}},
		{name: "unique", want: "unique", err: func(t *testing.T) error {
			conn := open(t, filepath.Join(t.TempDir(), "x.db"))
			_, err := conn.Exec("CREATE TABLE t (x UNIQUE)")
			require.NoError(t, err)
			_, err = conn.Exec("INSERT INTO t VALUES (1), (1)")
			return err
		}},
		{name: "primary key is not unique", err: func(t *testing.T) error {
			conn := open(t, filepath.Join(t.TempDir(), "x.db"))
			_, err := conn.Exec("CREATE TABLE t (x INTEGER PRIMARY KEY)")
			require.NoError(t, err)
			_, err = conn.Exec("INSERT INTO t VALUES (1), (1)")
			return err
		}},
		{name: "full", want: "full", err: func(t *testing.T) error {
			conn := open(t, filepath.Join(t.TempDir(), "x.db"))
			_, err := conn.Exec("CREATE TABLE t (x)")
			require.NoError(t, err)
			var pages int
			require.NoError(t, conn.QueryRow("PRAGMA page_count").Scan(&pages))
			require.NoError(t, conn.QueryRow("PRAGMA max_page_count = 3").Scan(&pages))
			_, err = conn.Exec("INSERT INTO t VALUES (zeroblob(100000))")
			return err
		}},
		{name: "syntax error", err: func(t *testing.T) error {
			_, err := open(t, filepath.Join(t.TempDir(), "x.db")).Exec("NOT SQL")
			return err
		}},
		{name: "not SQLite's", err: func(*testing.T) error { return errors.New("database or disk is full") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err(t)
			require.Error(t, err)
			for name, check := range checks {
				require.Equal(t, name == tt.want, check(err), "%s(%v)", name, err)
				require.Equal(t, name == tt.want, check(wrapped{err}), "%s, wrapped", name)
			}
		})
	}
}

type wrapped struct{ err error }

func (w wrapped) Error() string { return "context: " + w.err.Error() }
func (w wrapped) Unwrap() error { return w.err }

// New's DenyAttach refuses ATTACH and VACUUM INTO, and only with it;
// its collations are there.
func TestNew(t *testing.T) {
	dir := t.TempDir()
	db := func(t *testing.T, c sqlitedriver.Config) *sql.DB {
		conn := sql.OpenDB(connector{sqlitedriver.New(c), "file:" + filepath.Join(dir, "x.db")})
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	t.Run("DenyAttach", func(t *testing.T) {
		conn := db(t, sqlitedriver.Config{DenyAttach: true})
		_, err := conn.Exec("ATTACH '" + filepath.Join(dir, "other.db") + "' AS o")
		require.ErrorContains(t, err, "authoriz")
		_, err = conn.Exec("VACUUM INTO '" + filepath.Join(dir, "copy.db") + "'")
		require.ErrorContains(t, err, "authoriz")
		require.NoFileExists(t, filepath.Join(dir, "other.db"))
		require.NoFileExists(t, filepath.Join(dir, "copy.db"))
		_, err = conn.Exec("CREATE TABLE IF NOT EXISTS t (x)")
		require.NoError(t, err, "the rest is allowed")
	})
	t.Run("without", func(t *testing.T) {
		conn := db(t, sqlitedriver.Config{})
		_, err := conn.Exec("ATTACH '" + filepath.Join(dir, "other.db") + "' AS o")
		require.NoError(t, err)
		_, err = conn.Exec("SELECT 'a' = 'A' COLLATE folded")
		require.ErrorContains(t, err, "no such collation")
	})
	t.Run("Collations", func(t *testing.T) {
		conn := db(t, sqlitedriver.Config{Collations: map[string]func(a, b string) int{
			"folded": func(a, b string) int { return strings.Compare(strings.ToLower(a), strings.ToLower(b)) },
		}})
		var eq bool
		require.NoError(t, conn.QueryRow("SELECT 'a' = 'A' COLLATE folded").Scan(&eq))
		require.True(t, eq)
	})
}

// connector opens dsn with drv.
type connector struct {
	drv driver.Driver
	dsn string
}

func (c connector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c connector) Driver() driver.Driver                        { return c.drv }
