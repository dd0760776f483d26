package sqlitestore

import (
	"context"
	"sync"

	"github.com/securemsg/storage/internal/db"
)

// pendingCount is the number of pending outbound rows, kept in memory so
// that PendingMessageCount(nil) does not scan the table (SELECT count(*) visits
// every index entry: O(pending)). SELECT count(*) stays the source of
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
// connection behind the store's back: after a failed transaction, as soon
// as a context is cancelled inside one (its rollback discards the
// connection and the next waiting call gets a new one, possibly before the
// failing call has even returned), or when the driver reports a bad
// connection. So the number is also taken together with the identity of
// the connection it was read on (the driver connection, from
// sql.Conn.Raw), and a count compares the identity of the connection its
// own transaction runs on, read while it holds that connection. That is
// race-free by construction: no failure has to be noticed and recorded in
// time, since the comparison is about the connection the count's
// data_version is read on, held for the whole count; equal identities
// mean the same connection, as the stored reference keeps the old
// connection's memory from being reused for a new one.
type pendingCount struct {
	// mu is held by every transaction that changes or counts pending
	// rows (Store.tx), so that a count never reads the number between a
	// commit and the update that follows it.
	mu      sync.Mutex
	known   bool
	n       int64
	version int64 // data_version of the connection when n was taken
	conn    any   // the driver connection n was taken on
}

// countAll returns the number of pending outbound rows: the in-memory
// count if nothing can have changed it behind the store, else SELECT
// count(*), which becomes the new in-memory count.
func (s *Store) countAll(ctx context.Context) (int64, error) {
	c := &s.count // read and written only inside tx, which holds its lock
	var n int64
	err := s.tx(ctx, countRead, func(t *txn) error {
		// The fast path needs no transaction: c.mu keeps the store's own
		// writers out, and a data_version equal to the one n was taken
		// with means no other connection committed since.
		version, err := t.PendingOutboundDataVersion(ctx)
		if err != nil {
			return err
		}
		if c.known && c.conn == t.conn && c.version == version {
			n = c.n
			return nil
		}
		// Recount: the number and the version it goes with are read in
		// one transaction.
		err = t.begin(func(q *db.Queries) error {
			var err error
			if version, err = q.PendingOutboundDataVersion(ctx); err != nil {
				return err
			}
			n, err = q.CountPendingOutbound(ctx)
			return err
		})
		if err != nil {
			return err
		}
		c.known, c.n, c.version, c.conn = true, n, version, t.conn
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
