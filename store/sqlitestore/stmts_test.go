package sqlitestore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// prepCounter is a driver wrapping the build's SQLite driver that counts,
// per SQL text, the statements prepared and those run unprepared.
type prepCounter struct {
	mu       sync.Mutex
	prepared map[string]int
	direct   map[string]int
}

func (d *prepCounter) reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.prepared, d.direct = map[string]int{}, map[string]int{}
}

func (d *prepCounter) counts() (prepared, direct map[string]int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.prepared), maps.Clone(d.direct)
}

func (d *prepCounter) add(m map[string]int, query string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m[query]++
}

// countedConn is what the counter needs of a connection of the build's
// driver.
type countedConn interface {
	driver.Conn
	driver.ConnPrepareContext
	driver.ConnBeginTx
	driver.ExecerContext
	driver.QueryerContext
}

func (d *prepCounter) Open(dsn string) (driver.Conn, error) {
	c, err := sqlitedriver.New(sqlitedriver.Config{}).Open(dsn)
	if err != nil {
		return nil, err
	}
	inner, ok := c.(countedConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("a %T connection lacks a method the counter calls", c)
	}
	return &prepConn{countedConn: inner, d: d}, nil
}

type prepConn struct {
	countedConn
	d *prepCounter
}

func (c *prepConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.d.add(c.d.prepared, query)
	return c.countedConn.PrepareContext(ctx, query)
}

func (c *prepConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *prepConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.d.add(c.d.direct, query)
	return c.countedConn.ExecContext(ctx, query, args)
}

func (c *prepConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c.d.add(c.d.direct, query)
	return c.countedConn.QueryContext(ctx, query, args)
}

var prepDrivers atomic.Int64

// openCounted opens a store whose connection is counted by the returned
// counter, reset once the store is open.
func openCounted(t *testing.T) (*sqlitestore.Store, *prepCounter) {
	t.Helper()
	d := &prepCounter{}
	d.reset()
	name := fmt.Sprintf("sqlite-prepcount-%d", prepDrivers.Add(1))
	sql.Register(name, d)
	s, err := sqlitestore.Open(sqliteaccess.WithDriver(context.Background(), name), dbPath(t), storetest.NewKeyring(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	d.reset()
	return s, d
}

// Each query is parsed and planned once per connection: after a first
// round of calls (a statement of its own, a transaction), a second round
// of the same calls prepares nothing and runs nothing unprepared; in the
// first, a query a transaction ran first is prepared twice (on the
// transaction, then for the cache), any other once.
func TestStatementsPreparedOnce(t *testing.T) {
	ctx := context.Background()
	s, d := openCounted(t)
	bob := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	n := 0
	round := func() {
		for range 3 {
			n++
			_, err := s.InsertPending(ctx, bob, storetest.ID(n), []byte("hello")) // a transaction
			require.NoError(t, err)
			_, err = s.PendingRecipients(ctx, store.RecipientPageRequest{Limit: store.MaxPageSize}) // a statement
			require.NoError(t, err)
			_, err = s.PendingMessages(ctx, store.PageRequest{Limit: 10})
			require.NoError(t, err)
		}
	}
	round()
	prepared, direct := d.counts()
	require.Empty(t, direct, "no generated query runs unprepared")
	require.NotEmpty(t, prepared)
	for q, k := range prepared {
		require.LessOrEqual(t, k, 2, "prepared more than twice: %s", q)
	}
	d.reset()
	round()
	prepared, direct = d.counts()
	require.Empty(t, prepared, "the second round prepares nothing")
	require.Empty(t, direct)
}

// Calls in transactions and calls of one statement, each the first of its
// query on the connection, run together without waiting on one another
// forever: no lock is held while a statement is prepared (which needs the
// connection a transaction may hold), and every call's result is right.
func TestStatementsPreparedConcurrently(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t)
	const workers, each = 8, 25
	done := make(chan error, workers)
	for w := range workers {
		go func() {
			done <- func() error {
				to := store.DeviceAddress{UserID: fmt.Sprintf("user-%d", w), DeviceID: 1}
				for i := range each {
					id := storetest.ID(w*each + i)
					if _, err := s.InsertPending(ctx, to, id, []byte("x")); err != nil {
						return err
					}
					if _, err := s.PendingRecipients(ctx, store.RecipientPageRequest{Limit: 5}); err != nil {
						return err
					}
					n, err := s.PendingMessageCount(ctx, &to)
					if err != nil {
						return err
					}
					if n != int64(i+1) {
						return fmt.Errorf("%s: count %d, want %d", to, n, i+1)
					}
					if i%2 == 1 {
						if ok, err := s.AbandonPending(ctx, to, id); err != nil || !ok {
							return fmt.Errorf("abandon %s %v: %v, %w", to, id, ok, err)
						}
						if _, err := s.InsertPending(ctx, to, id, []byte("again")); err != nil {
							return err
						}
					}
				}
				return nil
			}()
		}()
	}
	deadline := time.After(2 * time.Minute)
	for range workers {
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-deadline:
			t.Fatal("calls still waiting after two minutes: a statement's preparation waits on the connection a transaction holds")
		}
	}
	n, err := s.PendingMessageCount(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, int64(workers*each), n)
}
