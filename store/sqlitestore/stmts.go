package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"sync"

	"github.com/securemsg/storage/internal/db"
)

// stmts is what the generated queries run on (db.DBTX): each query's text
// is prepared on the store's connection the first time it runs and the
// prepared statement reused after, so that SQLite parses and plans each
// query once per connection rather than once per call (preparing the
// recipients' scan alone took 68 µs on a 2-core machine). The texts are
// the generated queries', a fixed set, which
// bounds the cache. A statement that fails to prepare is not kept (the
// next call prepares it again), and nothing cached outlives close.
//
// No lock is held while a statement is prepared: preparing needs the
// connection, which a transaction may hold while it looks its own
// statements up. A transaction's first use of a query prepares it on the
// transaction (database/sql closes that one when the transaction ends)
// and leaves it to prepareMissed, which the store runs once the
// connection is free again.
type stmts struct {
	conn *sql.DB

	mu     sync.Mutex
	byText map[string]*sql.Stmt
	missed map[string]bool // run in a transaction, not yet in byText
	closed bool
}

var (
	_ db.DBTX = (*stmts)(nil)
	_ db.DBTX = txStmts{}
)

// newStmts is the statement cache of conn, and the queries bound to it.
func newStmts(conn *sql.DB) (*stmts, *db.Queries) {
	c := &stmts{conn: conn, byText: make(map[string]*sql.Stmt), missed: make(map[string]bool)}
	return c, db.New(c)
}

// cached is query's prepared statement, or nil.
func (c *stmts) cached(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byText[query]
}

// stmt is query prepared on the connection, from the cache or now.
func (c *stmts) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st := c.cached(query); st != nil {
		return st, nil
	}
	st, err := c.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch first := c.byText[query]; {
	case c.closed:
		st.Close()
		return nil, sql.ErrConnDone
	case first != nil: // prepared meanwhile by another call
		st.Close()
		return first, nil
	}
	c.byText[query] = st
	delete(c.missed, query)
	return st, nil
}

// miss records that a transaction ran query unprepared.
func (c *stmts) miss(query string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.missed[query] = true
	}
}

// prepareMissed prepares the queries transactions ran unprepared. It is
// called with the connection free (between transactions); a query that
// fails to prepare stays missed.
func (c *stmts) prepareMissed(ctx context.Context) {
	c.mu.Lock()
	var todo []string
	for q := range c.missed {
		todo = append(todo, q)
	}
	c.mu.Unlock()
	for _, q := range todo {
		if _, err := c.stmt(ctx, q); err != nil {
			return
		}
	}
}

// close closes every statement prepared, before the connection is closed;
// a query run after prepares none.
func (c *stmts) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for _, st := range c.byText {
		errs = append(errs, st.Close())
	}
	clear(c.byText)
	clear(c.missed)
	return errors.Join(errs...)
}

// ExecContext implements db.DBTX.
func (c *stmts) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// QueryContext implements db.DBTX.
func (c *stmts) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// QueryRowContext implements db.DBTX. A *sql.Row carries its error only
// from database/sql: a query that cannot be prepared runs unprepared, and
// its Row reports the same failure.
func (c *stmts) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := c.stmt(ctx, query)
	if err != nil {
		return c.conn.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// PrepareContext implements db.DBTX (the generated queries never call it).
func (c *stmts) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return c.stmt(ctx, query)
}

// txStmts is the cache seen from one transaction: each statement is the
// cached one bound to the transaction, or one prepared on the transaction
// for this call (see stmts).
type txStmts struct {
	tx *sql.Tx
	c  *stmts
}

// withTx is the queries of tx, on c's statements.
func (c *stmts) withTx(tx *sql.Tx) *db.Queries { return db.New(txStmts{tx: tx, c: c}) }

// stmt is query's statement in the transaction.
func (t txStmts) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st := t.c.cached(query); st != nil {
		return t.tx.StmtContext(ctx, st), nil
	}
	st, err := t.tx.PrepareContext(ctx, query)
	if err == nil {
		t.c.miss(query)
	}
	return st, err
}

// ExecContext implements db.DBTX.
func (t txStmts) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := t.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// QueryContext implements db.DBTX.
func (t txStmts) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := t.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// QueryRowContext implements db.DBTX (see stmts.QueryRowContext).
func (t txStmts) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := t.stmt(ctx, query)
	if err != nil {
		return t.tx.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// PrepareContext implements db.DBTX (the generated queries never call it).
func (t txStmts) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return t.stmt(ctx, query)
}
