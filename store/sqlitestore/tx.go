package sqlitestore

import (
	"context"
	"database/sql"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/store"
)

// txn is one storage transaction of the store: the generated queries bound
// to it, and the change its statements made to the number of pending
// outbound and inbound rows, which the in-memory counts (pendingCount)
// take once it has committed.
type txn struct {
	*db.Queries
	// pending and inbound are by how much fn changed the number of
	// pending outbound and pending inbound rows (in a counted kind).
	pending, inbound int64
}

// txKind says how a transaction runs: as one statement or between BEGIN
// and COMMIT, and whether it is counted (see tx).
type txKind int

const (
	// statement is a single statement: it runs outside BEGIN, where
	// SQLite gives it its own transaction (one snapshot; for a write,
	// committed and durable when it returns, synchronous=FULL), without
	// the round trips of BEGIN and COMMIT.
	statement txKind = iota
	// transaction is several statements between BEGIN IMMEDIATE and
	// COMMIT: reads that need one snapshot, and writes.
	transaction
	// countedStatement is a statement that inserts, deletes or counts
	// all pending rows (outbound or inbound).
	countedStatement
	// countedTransaction is a transaction that inserts, deletes or
	// counts all pending rows (outbound or inbound).
	countedTransaction
)

// tx is the store's one way into the database: every method of the
// store runs its statements, seals the values they write and opens the
// values they read, inside fn
// (sealing inside the transaction costs a send nothing measurable: the
// client's BenchmarkSend ran 283-330 µs against 278-340 µs with sealing
// before it, interleaved in one run),
// as one transaction of kind (see txKind) with the generated queries
// bound to it; the transaction is committed if fn returns nil and rolled
// back otherwise.
//
// A counted kind holds the in-memory count's lock across the transaction
// and moves the count by what fn recorded in txn.pending once committed,
// so that a count never reads between a commit and the count's update;
// if it fails the next count asks SQLite.
//
// Locks, always in this order (each says why where it is declared):
// rotateMu, which RotateKey holds across all its transactions; sealMu,
// shared; for a counted kind, the count's lock; the connection; last,
// inside fn and only to look a key up, the keyring's own lock.
func (s *Store) tx(ctx context.Context, kind txKind, fn func(t *txn) error) error {
	s.sealMu.RLock()
	defer s.sealMu.RUnlock()
	// Checked under sealMu, which Close takes exclusively before it closes
	// the connection: a call either runs to its end on an open database
	// or returns ErrClosed, never the driver's error of a closed handle.
	if s.closed.Load() {
		return store.ErrClosed
	}
	t := &txn{}
	counted := kind == countedStatement || kind == countedTransaction
	c := &s.count
	if counted {
		c.mu.Lock()
		defer c.mu.Unlock()
	}
	var err error
	switch kind {
	case statement, countedStatement:
		t.Queries = s.q
		err = fn(t)
	default:
		err = sqltx.Run(ctx, s.conn, func(tx *sql.Tx) error {
			t.Queries = s.q.WithTx(tx)
			return fn(t)
		})
	}
	switch {
	case !counted:
	case err != nil:
		// A failed commit may or may not have reached the disk, and a
		// failed count read nothing to trust: the next count asks SQLite.
		c.known = false
	default:
		c.n += t.pending
		c.in += t.inbound
	}
	return err
}
