package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync"
	"sync/atomic"
)

// pendingCount is the number of pending outbound rows and of pending
// inbound rows, kept in memory so that PendingMessageCount(nil) and
// PendingInboundCount(nil) do not scan a table (SELECT count(*) visits
// every index entry: O(pending)); both are taken, and retaken, together. SELECT count(*) stays the source of
// truth: the first count after Open runs it, and every transaction that
// inserts or deletes pending rows through the store moves the number by
// what it changed, applied only once that transaction committed.
//
// The number is valid only while the store's connection is the
// database's only writer. That is checked, not assumed: the number is
// taken together with the connection's PRAGMA data_version, which changes
// whenever another connection (another process, another Store, the
// migrate command) commits; a count that sees a different data_version
// runs SELECT count(*) again. Writing pending rows through the store's
// own connection (internal/sqliteaccess.DB) is not seen: it is for reading.
//
// data_version values of two connections are not comparable (a fresh
// connection starts from the same value), and database/sql replaces the
// connection behind the store's back: as soon as a context is cancelled
// inside a transaction (go-sqlite3 cannot reset a session, so the
// connection is closed), or when the driver reports a bad connection.
// So the number is also taken together with how many connections the
// store had opened (opened, counted by the store's connector), read while
// the transaction that read the number holds the store's one connection. A later count reads data_version in one
// statement and then opened: if no connection was opened since, that
// statement ran on the connection the number was taken on, as the store
// never has more than one open (openConn). That is race-free by
// construction: no failure has to be noticed and recorded in time.
type pendingCount struct {
	// mu is held by every transaction that changes or counts pending
	// rows (the counted kinds of Store.tx), so that a count never reads
	// the number between a commit and the update that follows it.
	mu      sync.Mutex
	known   bool
	n       int64  // pending outbound
	in      int64  // pending inbound
	version int64  // data_version of the connection when n was taken
	conn    uint64 // opened when n was taken: that connection's number
	// opened is how many connections the store has opened.
	opened atomic.Uint64
}

// countingConnector opens the store's connections through a driver and
// counts them in opened (see pendingCount).
type countingConnector struct {
	drv    driver.Driver
	dsn    string
	opened *atomic.Uint64
}

// Connect opens a connection and counts it.
func (c countingConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	c.opened.Add(1)
	return conn, nil
}

// Driver returns the driver the connections are opened through.
func (c countingConnector) Driver() driver.Driver { return c.drv }

// countAll returns the number of pending outbound rows and of pending
// inbound rows: the in-memory counts if nothing can have changed them
// behind the store, else SELECT count(*) of each, which become the new
// in-memory counts.
func (s *Store) countAll(ctx context.Context) (outbound, inbound int64, _ error) {
	c := &s.count // n, in, known, version and conn: read and written only under c.mu (tx)
	var n, in int64
	var fresh bool
	err := s.tx(ctx, countedStatement, func(t *txn) error {
		// c.mu keeps the store's own writers out; a data_version equal to
		// the one n was taken with, on the same connection, means no
		// other connection committed since.
		version, err := t.PendingOutboundDataVersion(ctx)
		if err != nil {
			return err
		}
		n, in, fresh = c.n, c.in, c.known && c.version == version && c.conn == c.opened.Load() && s.oneConnection()
		return nil
	})
	if err != nil || fresh {
		return n, in, err
	}
	// Recount: the number and the version it goes with are read in one
	// transaction, on one connection, the number of which is read while
	// the transaction holds it.
	err = s.tx(ctx, countedTransaction, func(t *txn) error {
		version, err := t.PendingOutboundDataVersion(ctx)
		if err != nil {
			return err
		}
		if n, err = t.CountPendingOutbound(ctx); err != nil {
			return err
		}
		if in, err = t.CountPendingInbound(ctx); err != nil {
			return err
		}
		c.known, c.n, c.in, c.version, c.conn = true, n, in, version, c.opened.Load()
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return n, in, nil
}

// oneConnection reports whether the store's pool still opens at most one
// connection (openConn sets it; a tool holding the handle through
// internal/sqliteaccess.DB could raise it): the count trusts its number
// only then, and otherwise asks SQLite every time.
func (s *Store) oneConnection() bool { return s.conn.Stats().MaxOpenConnections == 1 }

// openCounted returns a database handle opening its connections to dsn
// through the driver registered as name, counted in opened.
func openCounted(name, dsn string, opened *atomic.Uint64) (*sql.DB, error) {
	probe, err := sql.Open(name, dsn) // opens no connection
	if err != nil {
		return nil, err
	}
	drv := probe.Driver()
	if err := probe.Close(); err != nil {
		return nil, err
	}
	return sql.OpenDB(countingConnector{drv: drv, dsn: dsn, opened: opened}), nil
}
