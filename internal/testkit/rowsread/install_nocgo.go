//go:build !cgo

package rowsread

import (
	"context"
	"database/sql"
)

// Install returns ErrUnsupported: the pure-Go driver registers functions
// for every connection it opens, not on one already open.
func Install(context.Context, *sql.DB) (*Counter, error) { return nil, ErrUnsupported }
