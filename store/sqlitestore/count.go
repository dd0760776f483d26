package sqlitestore

import (
	"context"
	"sync"

	"github.com/securemsg/storage/internal/db"
)

// pendingCount is the number of pending outbound rows, kept in memory so
// that CountPending(nil) does not scan the table (SELECT count(*) visits
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
// runs SELECT count(*) again. data_version values of two connections are
// not comparable, and database/sql replaces a connection only after a
// failed transaction (a context cancelled inside one discards it), so the
// number is also dropped after any failed transaction of the store
// (Store.txFailures). Writing pending rows through Store.DB() on the
// store's own connection is not seen: DB() is for reading.
type pendingCount struct {
	// mu is held by every pending-row writer across its transaction and
	// by CountPending(nil) across its own, so that a count never reads
	// the number between a commit and the update that follows it. Lock
	// order: Store.sealMu, then mu, then the connection.
	mu      sync.Mutex
	known   bool
	n       int64
	version int64  // data_version of the connection when n was taken
	epoch   uint64 // Store.txFailures when n was taken
}

// writePending runs fn, which inserts or deletes pending rows and returns
// by how many their number changed, in one transaction, and moves the
// in-memory count by that change once the transaction committed. After a
// failure the count is dropped: a failed commit may or may not have
// reached the disk, and the next count asks SQLite.
func (s *Store) writePending(ctx context.Context, fn func(q *db.Queries) (delta int64, err error)) error {
	c := &s.count
	c.mu.Lock()
	defer c.mu.Unlock()
	var delta int64
	err := s.withTx(ctx, func(q *db.Queries) error {
		var err error
		delta, err = fn(q)
		return err
	})
	if err != nil {
		c.known = false
		return err
	}
	c.n += delta
	return nil
}

// countAll returns the number of pending outbound rows: the in-memory
// count if nothing can have changed it behind the store, else SELECT
// count(*), which becomes the new in-memory count.
func (s *Store) countAll(ctx context.Context) (int64, error) {
	c := &s.count
	c.mu.Lock()
	defer c.mu.Unlock()
	epoch := s.txFailures.Load()
	var n, version int64
	fresh := false
	err := s.withTx(ctx, func(q *db.Queries) error {
		var err error
		if version, err = q.PendingOutboundDataVersion(ctx); err != nil {
			return err
		}
		if c.known && c.version == version && c.epoch == epoch {
			n = c.n
			return nil
		}
		fresh = true
		n, err = q.CountPendingOutbound(ctx)
		return err
	})
	if err != nil {
		c.known = false
		return 0, err
	}
	if fresh {
		c.known, c.n, c.version, c.epoch = true, n, version, epoch
	}
	return n, nil
}
