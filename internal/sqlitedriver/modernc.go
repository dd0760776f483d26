//go:build !cgo

package sqlitedriver

import (
	"database/sql/driver"
	"errors"
	"strconv"

	"modernc.org/sqlite"
)

// Name is the database/sql name the driver of this build registers.
const Name = "sqlite"

// Package is the import path of the driver of this build.
const Package = "modernc.org/sqlite"

// StoreDSN returns the data source name a store opens the file at uri (a
// path escaped for a "file:" URI) with: immediate transactions, a busy
// timeout, foreign keys on, synchronous=FULL and a page cache of
// pageCacheKiB. The driver keeps no prepared statements between calls.
func StoreDSN(uri string, pageCacheKiB int) string {
	return "file:" + uri + "?_txlock=immediate&_busy_timeout=10000&_foreign_keys=on&_synchronous=FULL" +
		"&_pragma=cache_size(-" + strconv.Itoa(pageCacheKiB) + ")"
}

// New returns a driver, registered under no name, whose connections have
// c's settings.
func New(c Config) driver.Driver {
	d := &sqlite.Driver{}
	for name, cmp := range c.Collations {
		if err := d.RegisterCollationUtf8(name, cmp); err != nil {
			panic(err) // only a name registered twice fails: a map has none
		}
	}
	if c.DenyAttach {
		d.RegisterConnectionHook(func(conn sqlite.ExecQuerierContext, _ string) error {
			r, ok := conn.(sqlite.AuthorizerRegisterer)
			if !ok {
				return errors.New("sqlitedriver: the driver's connection sets no authorizer")
			}
			return r.RegisterAuthorizer(func(action sqlite.AuthorizerActionCode, _, _, _, _ string) sqlite.AuthorizerReturnCode {
				if action == sqlite.AuthAttach {
					return sqlite.AuthorizerDeny
				}
				return sqlite.AuthorizerOK
			})
		})
	}
	return d
}

// code returns the primary and extended result codes err carries, if it
// is SQLite's.
func code(err error) (primary, extended int, ok bool) {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return 0, 0, false
	}
	return se.Code() & 0xff, se.Code(), true
}
