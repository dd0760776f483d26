package sqlitestore

import (
	"context"
	"database/sql"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/store"
)

// txn is one storage transaction of the store: the generated queries bound
// to it, and the change its statements made to the number of pending rows,
// which the in-memory count (pendingCount) takes once it has committed.
type txn struct {
	*db.Queries
	pending int64
	// counted is set (in a pendingWrite) once pending rows may have
	// changed: if the transaction then fails (its commit may or may not
	// have reached the disk), the in-memory count is dropped and the next
	// count asks SQLite.
	counted bool
}

// txKind says what a transaction does, which decides how it runs.
type txKind int

const (
	// oneRead is a single statement that only reads: it runs outside
	// BEGIN, where SQLite gives the statement its own transaction (one
	// snapshot), without the round trips of BEGIN and COMMIT.
	oneRead txKind = iota
	// inTx is a transaction that inserts or deletes no pending row.
	inTx
	// pendingWrite is a transaction that inserts or deletes pending rows:
	// it holds the in-memory count's lock across the transaction, so that
	// a count never reads between its commit and the count's update.
	pendingWrite
	// onePendingWrite is a single statement that inserts or deletes
	// pending rows: it runs outside BEGIN, where SQLite commits it as its
	// own transaction (durable when it returns, synchronous=FULL), without
	// the round trips of BEGIN and COMMIT, and holds the in-memory count's
	// lock as a pendingWrite does.
	onePendingWrite
)

// tx is the store's one way into the database: it runs fn as one
// transaction of kind with the generated queries bound to it, committed
// if fn returns nil and rolled back otherwise (a transaction is begun
// IMMEDIATE by internal/sqltx, so that a failed COMMIT is seen as such),
// and moves the in-memory count by what fn recorded once committed. Lock
// order: Store.sealMu, the count's lock, the connection.
func (s *Store) tx(ctx context.Context, kind txKind, fn func(t *txn) error) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	t := &txn{}
	counted := kind == pendingWrite || kind == onePendingWrite
	c := &s.count
	if counted {
		c.mu.Lock()
		defer c.mu.Unlock()
	}
	var err error
	if kind == oneRead || kind == onePendingWrite {
		t.Queries = s.q
		err = fn(t)
	} else {
		err = sqltx.Run(ctx, s.conn, func(tx *sql.Tx) error {
			t.Queries = s.q.WithTx(tx)
			return fn(t)
		})
	}
	switch {
	case !counted:
	case err != nil && t.counted:
		c.known = false
	case err == nil:
		c.n += t.pending
	}
	return err
}
