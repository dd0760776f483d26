// Package fixturekit loads database fixtures for tests and the tools:
// Load creates a database from SQL text (a frozen fixture.sql) on a
// connection from OpenConfined, which cannot reach any database file but
// the one it opened, so SQL text read from files cannot touch another.
// Only tests and the tools module import it.
package fixturekit

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/seal"
)

// OpenRW opens path read-write, creating it if absent, confined
// (OpenConfined): a fixture.sql it loads cannot ATTACH another
// database file.
func OpenRW(path string) *sql.DB {
	conn := OpenConfined("file:" + migration.URIPath(path) + "?mode=rwc&_txlock=immediate&_busy_timeout=10000&_foreign_keys=on")
	conn.SetMaxOpenConns(1)
	return conn
}

// Load creates a database at path by executing fixture, the SQL text of a
// fixture.sql, in one transaction. path must not exist or be an empty
// file. It returns an error wrapping ErrNotEmpty if path holds data, the
// error of creating the file, or the fixture's SQL error (then nothing of
// it is committed); the SQL runs on a confined connection
// (OpenConfined), so an ATTACH fails with SQLite's authorization
// error.
func Load(ctx context.Context, path string, fixture []byte) error {
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
		return fmt.Errorf("fixturekit: load %s: %w", path, ErrNotEmpty)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("fixturekit: load: %w", err)
	}
	conn := OpenRW(path)
	defer conn.Close()
	err := sqltx.Run(ctx, conn, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, string(fixture))
		return err
	})
	if err != nil {
		return fmt.Errorf("fixturekit: load: %w", err)
	}
	return conn.Close()
}

// OpenConfined opens dsn, a DSN of the build's SQLite driver
// (internal/sqlitedriver), on connections that
// refuse ATTACH (and VACUUM INTO, which attaches its output) with
// SQLite's authorization error, through an authorizer set on every
// connection: for running SQL text read from files (migration files,
// fixture dumps) without letting it create, change or drop any database
// file but the one opened. The migration pipeline's OpenMemory uses it. It registers no driver:
// nothing changes for the rest of the program. Like sql.Open it only
// validates its arguments; the first use connects, and returns SQLite's
// error if the file cannot be opened.
func OpenConfined(dsn string) *sql.DB {
	return sql.OpenDB(confinedConnector{dsn: dsn})
}

// confinedDriver is the build's SQLite driver with the authorizer of
// OpenConfined on every connection it opens.
var confinedDriver = sqlitedriver.New(sqlitedriver.Config{DenyAttach: true})

// confinedConnector opens confinedDriver connections to one DSN.
type confinedConnector struct{ dsn string }

func (c confinedConnector) Connect(context.Context) (driver.Conn, error) {
	return confinedDriver.Open(c.dsn)
}

func (c confinedConnector) Driver() driver.Driver { return confinedDriver }

// Key returns the published fixture test key every frozen fixture is
// sealed with (fixtures/version14, fixtures/legacy): secret = bytes 0x00, 0x01, ..., 0x1f. It is a published
// test key: never use it for real data.
func Key() seal.Key {
	secret := make([]byte, seal.KeySize)
	for i := range secret {
		secret[i] = byte(i)
	}
	k, err := seal.NewKey(secret)
	if err != nil {
		panic(err) // KeySize bytes: cannot happen
	}
	return k
}
