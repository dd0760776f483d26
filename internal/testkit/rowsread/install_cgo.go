//go:build cgo

package rowsread

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/mattn/go-sqlite3"
)

// Install replaces typeof on conn's connection (the store keeps one:
// sqliteaccess.DB) by a counting one and returns its counter. The
// replacement stays until the connection closes.
func Install(ctx context.Context, conn *sql.DB) (*Counter, error) {
	c := &Counter{}
	sc, err := conn.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer sc.Close()
	err = sc.Raw(func(dc any) error {
		raw, ok := dc.(*sqlite3.SQLiteConn)
		if !ok {
			return fmt.Errorf("rowsread: connection of driver %T, not go-sqlite3", dc)
		}
		return raw.RegisterFunc("typeof", c.typeOf, false)
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}
