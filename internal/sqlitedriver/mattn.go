//go:build cgo

package sqlitedriver

import (
	"database/sql/driver"
	"errors"
	"strconv"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// Name is the database/sql name the driver of this build registers.
const Name = "sqlite3"

// Package is the import path of the driver of this build.
const Package = "github.com/mattn/go-sqlite3"

// StoreDSN returns the data source name a store opens the file at uri (a
// path escaped for a "file:" URI) with: immediate transactions, a busy
// timeout, foreign keys on, synchronous=FULL, a page cache of
// pageCacheKiB, and a per-connection cache of prepared statements (the
// store runs the same few queries over and over).
func StoreDSN(uri string, pageCacheKiB int) string {
	return "file:" + uri + "?_txlock=immediate&_busy_timeout=10000&_foreign_keys=on&_synchronous=FULL&_stmt_cache_size=32" +
		"&_cache_size=-" + strconv.Itoa(pageCacheKiB)
}

// New returns a driver, registered under no name, whose connections have
// c's settings.
func New(c Config) driver.Driver {
	return &sqlite3.SQLiteDriver{ConnectHook: func(conn *sqlite3.SQLiteConn) error {
		if c.DenyAttach {
			conn.RegisterAuthorizer(func(action int, _, _, _ string) int {
				if action == sqlite3.SQLITE_ATTACH {
					return sqlite3.SQLITE_DENY
				}
				return sqlite3.SQLITE_OK
			})
		}
		for name, cmp := range c.Collations {
			if err := conn.RegisterCollation(name, cmp); err != nil {
				return err
			}
		}
		return nil
	}}
}

// code returns the primary and extended result codes err carries, if it
// is SQLite's.
func code(err error) (primary, extended int, ok bool) {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return 0, 0, false
	}
	return int(se.Code), int(se.ExtendedCode), true
}
