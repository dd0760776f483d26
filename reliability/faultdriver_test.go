package reliability_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/securemsg/storage/internal/sqlitedriver"
)

// errInjected is the storage failure the fault driver injects.
var errInjected = errors.New("injected storage fault")

// Fault operations.
const (
	opStmt   = "stmt"   // a statement (Exec or Query) whose SQL contains Match
	opNext   = "next"   // reading row AfterRows+1 of a query whose SQL contains Match
	opCommit = "commit" // the COMMIT of a transaction that ran a statement containing Match
	// opCommitLost: that COMMIT reaches the disk, then reports an error,
	// as a commit whose I/O error came after its WAL frame was written: a
	// failed commit whose changes stayed.
	opCommitLost = "commitlost"
	// opBadConn: the ROLLBACK of a transaction that ran a statement
	// containing Match rolls back, then reports driver.ErrBadConn, so
	// database/sql closes the connection and opens a new one for the next
	// call (as it does when a context is cancelled inside a transaction).
	opBadConn = "badconn"
)

// fault fails one call: the Skip+1-th call of Op matching Match.
type fault struct {
	Op        string
	Match     string
	Skip      int
	AfterRows int // opNext only
	// Hold, for opStmt only: when the fault fires, the statement closes
	// Reached and waits for Hold to be closed before failing, holding its
	// connection meanwhile (to line up a concurrent call behind it).
	Hold, Reached chan struct{}
}

// hold makes a firing fault wait as its Hold says.
func (f *fault) hold() {
	if f.Hold != nil {
		close(f.Reached)
		<-f.Hold
	}
}

// injector decides which driver calls fail. It is shared by every
// connection of one fault driver.
type injector struct {
	mu     sync.Mutex
	faults []*fault
	hits   int // faults fired

	// maxPages, when positive, is applied as PRAGMA max_page_count to
	// every connection before its next statement: a full disk.
	maxPages atomic.Int64

	// opens counts the connections opened through the driver.
	opens atomic.Int64
}

// fail arms one fault.
func (inj *injector) fail(f fault) {
	inj.mu.Lock()
	defer inj.mu.Unlock()
	inj.faults = append(inj.faults, &f)
}

// reset returns how many armed faults have fired, and disarms the rest.
func (inj *injector) reset() int {
	inj.mu.Lock()
	defer inj.mu.Unlock()
	n := inj.hits
	inj.faults, inj.hits = nil, 0
	return n
}

// take reports whether a call of op on query must fail, consuming the fault.
func (inj *injector) take(op, query string) (bool, *fault) {
	inj.mu.Lock()
	defer inj.mu.Unlock()
	for i, f := range inj.faults {
		if f.Op != op || !strings.Contains(query, f.Match) {
			continue
		}
		if f.Skip > 0 {
			f.Skip--
			continue
		}
		inj.faults = append(inj.faults[:i], inj.faults[i+1:]...)
		if op != opNext {
			inj.hits++ // an opNext fault fires when its row is read
		}
		return true, f
	}
	return false, nil
}

func (inj *injector) fire() {
	inj.mu.Lock()
	inj.hits++
	inj.mu.Unlock()
}

var driverSeq atomic.Int64

// registerFaultDriver registers a database/sql driver wrapping the build's
// SQLite driver (internal/sqlitedriver)
// that fails the calls inj is armed for, and returns its name (for
// sqliteaccess.WithDriver: sqlitestore.Open then uses it). Errors of the real
// driver pass through unchanged.
func registerFaultDriver(t testing.TB, inj *injector) string {
	t.Helper()
	name := fmt.Sprintf("sqlite3-fault-%d", driverSeq.Add(1))
	sql.Register(name, &faultDriver{inj: inj})
	return name
}

type faultDriver struct{ inj *injector }

// innerConn is what the fault driver calls on a connection of the
// build's SQLite driver: both drivers' connections have all of it.
type innerConn interface {
	driver.Conn
	driver.ExecerContext
	driver.QueryerContext
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.Pinger
}

func (d *faultDriver) Open(dsn string) (driver.Conn, error) {
	d.inj.opens.Add(1)
	c, err := sqlitedriver.New(sqlitedriver.Config{}).Open(dsn)
	if err != nil {
		return nil, err
	}
	inner, ok := c.(innerConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("fault driver: a %T connection lacks a method the fault driver calls", c)
	}
	return &faultConn{inner: inner, inj: d.inj}, nil
}

type faultConn struct {
	inner    innerConn
	inj      *injector
	maxPages int64
	// statements run in the current transaction, for opCommit
	txSQL []string
	// inTx is set between BeginTx and the transaction's end; outside it a
	// statement is its own transaction, whose commit opCommit fails.
	inTx bool
}

var (
	_ driver.ExecerContext      = (*faultConn)(nil)
	_ driver.QueryerContext     = (*faultConn)(nil)
	_ driver.ConnBeginTx        = (*faultConn)(nil)
	_ driver.ConnPrepareContext = (*faultConn)(nil)
	_ driver.Pinger             = (*faultConn)(nil)
)

// limit applies the injector's page limit to this connection.
func (c *faultConn) limit(ctx context.Context) error {
	want := c.inj.maxPages.Load()
	if want == c.maxPages {
		return nil
	}
	lim := want
	if lim <= 0 {
		lim = 1073741823 // SQLite's default maximum
	}
	rows, err := c.inner.QueryContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", lim), nil)
	if err != nil {
		return err
	}
	defer rows.Close()
	dest := make([]driver.Value, 1)
	if err := rows.Next(dest); err != nil && err != io.EOF {
		return err
	}
	c.maxPages = want
	return nil
}

func (c *faultConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if err := c.limit(ctx); err != nil {
		return nil, err
	}
	c.txSQL = append(c.txSQL, query) // attempted: opBadConn matches a failed statement too
	if !c.inTx {
		// The statement's own transaction fails to commit: SQLite rolls
		// it back, so nothing it did stays.
		if ok, _ := c.inj.take(opCommit, query); ok {
			return nil, fmt.Errorf("commit of %q: %w", firstLine(query), errInjected)
		}
		if ok, _ := c.inj.take(opCommitLost, query); ok {
			if _, err := c.inner.ExecContext(ctx, query, args); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("commit of %q (committed): %w", firstLine(query), errInjected)
		}
	}
	if ok, f := c.inj.take(opStmt, query); ok {
		f.hold()
		return nil, fmt.Errorf("exec %q: %w", firstLine(query), errInjected)
	}
	return c.inner.ExecContext(ctx, query, args)
}

func (c *faultConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if err := c.limit(ctx); err != nil {
		return nil, err
	}
	c.txSQL = append(c.txSQL, query)
	if ok, f := c.inj.take(opStmt, query); ok {
		f.hold()
		return nil, fmt.Errorf("query %q: %w", firstLine(query), errInjected)
	}
	rows, err := c.inner.QueryContext(ctx, query, args)
	if err != nil {
		return nil, err
	}
	if ok, f := c.inj.take(opNext, query); ok {
		return &faultRows{Rows: rows, inj: c.inj, left: f.AfterRows}, nil
	}
	return rows, nil
}

func (c *faultConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if err := c.limit(ctx); err != nil {
		return nil, err
	}
	c.txSQL = append(c.txSQL, query)
	return c.inner.PrepareContext(ctx, query)
}

func (c *faultConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *faultConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if err := c.limit(ctx); err != nil {
		return nil, err
	}
	tx, err := c.inner.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	c.txSQL = c.txSQL[:0]
	c.inTx = true
	return &faultTx{inner: tx, c: c}, nil
}

func (c *faultConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *faultConn) Close() error                   { return c.inner.Close() }
func (c *faultConn) Ping(ctx context.Context) error { return c.inner.Ping(ctx) }

type faultTx struct {
	inner driver.Tx
	c     *faultConn
}

// Commit fails like a COMMIT that hit an I/O error: the transaction is
// rolled back and the error returned.
func (tx *faultTx) Commit() error {
	tx.c.inTx = false
	for _, q := range tx.c.txSQL {
		if ok, _ := tx.c.inj.take(opCommit, q); ok {
			if err := tx.inner.Rollback(); err != nil {
				return errors.Join(fmt.Errorf("commit: %w", errInjected), err)
			}
			return fmt.Errorf("commit after %q: %w", firstLine(q), errInjected)
		}
		if ok, _ := tx.c.inj.take(opCommitLost, q); ok {
			if err := tx.inner.Commit(); err != nil {
				return err
			}
			return fmt.Errorf("commit after %q (committed): %w", firstLine(q), errInjected)
		}
	}
	return tx.inner.Commit()
}

func (tx *faultTx) Rollback() error {
	tx.c.inTx = false
	if err := tx.inner.Rollback(); err != nil {
		return err
	}
	for _, q := range tx.c.txSQL {
		if ok, _ := tx.c.inj.take(opBadConn, q); ok {
			return driver.ErrBadConn
		}
	}
	return nil
}

// faultRows fails reading the row after the first left rows.
type faultRows struct {
	driver.Rows
	inj  *injector
	left int
}

func (r *faultRows) Next(dest []driver.Value) error {
	if r.left == 0 {
		r.inj.fire()
		return fmt.Errorf("read row: %w", errInjected)
	}
	r.left--
	return r.Rows.Next(dest)
}

func firstLine(q string) string {
	q = strings.TrimSpace(q)
	if i := strings.IndexByte(q, '\n'); i >= 0 {
		q = q[:i]
	}
	if len(q) > 60 {
		q = q[:60]
	}
	return q
}
