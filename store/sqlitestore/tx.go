package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/store"
)

// txn is one storage transaction of the store: the generated queries bound
// to it, and the change its statements made to the number of pending rows,
// which the in-memory count (pendingCount) takes once it has committed.
type txn struct {
	*db.Queries
	// pending is by how much fn changed the number of pending rows (in a
	// pendingWrite or onePendingWrite).
	pending int64
	// conn is, in a countRead, the driver connection the statements run
	// on, and begin runs a function in one transaction on that same
	// connection (see pendingCount).
	conn  any
	begin func(func(q *db.Queries) error) error
}

// txKind says what a transaction does, which decides how it runs.
type txKind int

const (
	// oneRead is a single statement that only reads: it runs outside
	// BEGIN, where SQLite gives the statement its own transaction (one
	// snapshot), without the round trips of BEGIN and COMMIT.
	oneRead txKind = iota
	// inTx is several statements in one transaction (BEGIN IMMEDIATE),
	// changing no pending row: reads that need one snapshot, and writes.
	inTx
	// pendingWrite is a transaction that inserts or deletes pending rows:
	// it holds the in-memory count's lock across the transaction, so that
	// a count never reads between its commit and the count's update.
	pendingWrite
	// onePendingWrite is a single statement that inserts or deletes
	// pending rows: it runs outside BEGIN, where SQLite commits it as its
	// own transaction (durable when it returns, synchronous=FULL), and
	// holds the in-memory count's lock as a pendingWrite does.
	onePendingWrite
	// countRead is the count of all pending rows (countAll): it holds the
	// count's lock and one connection for the whole call, whose identity
	// it passes in txn.conn, runs single statements on it outside BEGIN
	// and, through txn.begin, a transaction on the same connection.
	countRead
)

// tx is the store's one way into the database: every method of the
// store runs its statements, and seals the values they write, inside fn
// (sealing inside the transaction costs a send nothing measurable: the
// client's BenchmarkSend ran 283-330 µs against 278-340 µs with sealing
// before it, interleaved in one run),
// as one transaction of kind (see txKind) with the generated queries
// bound to it; the transaction is committed if fn returns nil and rolled
// back otherwise, and the in-memory count moves by what fn recorded once
// committed.
//
// Locks, always in this order: sealMu shared (RotateKey takes it
// exclusively to switch the sealing key, so no value sealed with the old
// key is written after its walk has begun), then, for the kinds that
// change or count pending rows, the count's lock, then the connection.
func (s *Store) tx(ctx context.Context, kind txKind, fn func(t *txn) error) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	s.sealMu.RLock()
	defer s.sealMu.RUnlock()
	t := &txn{}
	counted := kind == pendingWrite || kind == onePendingWrite || kind == countRead
	c := &s.count
	if counted {
		c.mu.Lock()
		defer c.mu.Unlock()
	}
	var err error
	switch kind {
	case oneRead, onePendingWrite:
		t.Queries = s.q
		err = fn(t)
	case countRead:
		err = s.pinned(ctx, t, fn)
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
		c.known, c.conn = false, nil
	default:
		c.n += t.pending
	}
	return err
}

// pinned runs fn (a countRead) on one connection held for the whole call.
func (s *Store) pinned(ctx context.Context, t *txn, fn func(t *txn) error) error {
	c, err := s.conn.Conn(ctx)
	if err != nil {
		return fmt.Errorf("get connection: %w", err)
	}
	defer c.Close()
	if err := c.Raw(func(dc any) error { t.conn = dc; return nil }); err != nil {
		return fmt.Errorf("get connection: %w", err)
	}
	t.Queries = db.New(c)
	t.begin = func(f func(q *db.Queries) error) error {
		return sqltx.Run(ctx, c, func(tx *sql.Tx) error { return f(s.q.WithTx(tx)) })
	}
	return fn(t)
}
