// Package rowsread counts the pending outbound index entries a store's
// queries look at, for tests that check a strategy's cost by what it
// reads rather than by time: how many entries of the recipient index a
// listing stepped over or landed on.
//
// Every query of the recipient index checks each entry it looks at with
// typeof(recipient_device_id) (queries/recipients.sql). Install replaces
// SQLite's typeof on the store's one connection, through the driver, with
// a function that returns the same answer and counts its calls; the
// application's code is left as it is (no hook in what it links). Only
// tests import this package.
package rowsread

import (
	"errors"
	"sync/atomic"
)

// ErrUnsupported is Install's error in a build whose driver cannot
// replace a function on one connection (the pure-Go driver, built
// without cgo): a test that needs the count skips.
var ErrUnsupported = errors.New("rowsread: the driver of this build cannot count")

// Counter counts the calls of typeof on the connection it is installed on.
type Counter struct{ n atomic.Int64 }

// typeOf is SQLite's typeof for the values the driver passes.
func (c *Counter) typeOf(v any) string {
	c.n.Add(1)
	switch v.(type) {
	case nil:
		return "null"
	case int64:
		return "integer"
	case float64:
		return "real"
	case string:
		return "text"
	default:
		return "blob"
	}
}

// Take returns the calls counted since the last Take and starts again
// from zero.
func (c *Counter) Take() int64 { return c.n.Swap(0) }
