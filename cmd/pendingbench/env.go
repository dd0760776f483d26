package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/testkit/benchseed"
	"github.com/securemsg/storage/internal/testkit/sealspy"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
	"github.com/securemsg/storage/transport/transporttest"
)

// env is one seeded database.
type env struct {
	name   string
	n      int
	path   string
	layout *benchseed.Layout
	s      *sqlitestore.Store
	keys   *sealspy.Keyring // counts the records the store opens
	// client is the store's client (bench-self), made on first use.
	client *client.Client
	net    *transporttest.Network
	// pragmas are applied to the store's connection after every open.
	pragmas []string
}

// self is the address every benchmark client runs as.
var self = store.DeviceAddress{UserID: "bench-self", DeviceID: 1}

// seq is the sequence of row i.
func (e *env) seq(i int) int64 { return int64(i) + 1 }

// rawDB is the store's own connection, for the raw baselines: same driver,
// same connection and page cache, no store code in between. It is only
// read through, except by the raw insert floor of the send line, which
// runs last (a write through it is not seen by the store's count).
func (e *env) rawDB() *sql.DB { return sqliteaccess.DB(e.s) }

// open opens the store of e (closing it first if open) with the store's
// own settings, then the -pragmas under trial.
func (e *env) open(ctx context.Context) error {
	if e.s != nil {
		if err := e.s.Close(); err != nil {
			return err
		}
		e.s, e.client = nil, nil
	}
	s, err := sqlitestore.Open(ctx, e.path, e.keys)
	if err != nil {
		return err
	}
	e.s = s
	return e.applyPragmas(ctx)
}

func (e *env) applyPragmas(ctx context.Context) error {
	for _, p := range e.pragmas {
		if _, err := sqliteaccess.DB(e.s).ExecContext(ctx, "PRAGMA "+p); err != nil {
			return fmt.Errorf("PRAGMA %s: %w", p, err)
		}
	}
	return nil
}

// coldOpen closes the store, evicts its files from the OS page cache and
// opens it again: the next call meets a cold SQLite page cache and a cold
// OS cache, as the first call after an app start does.
func (e *env) coldOpen(ctx context.Context) error {
	if err := e.closeEvicted(); err != nil {
		return err
	}
	return e.open(ctx)
}

// closeEvicted closes the store and evicts its files from the OS page
// cache: the next open reads every page it needs from the disk.
func (e *env) closeEvicted() error {
	if err := e.s.Close(); err != nil {
		return err
	}
	e.s, e.client = nil, nil
	return evict(e.path)
}

// theClient returns the client over e's store, initialized as self, with
// its bundle published: every store's client is self on one network, so
// the one asked for last is the one peers reach.
func (e *env) theClient(ctx context.Context) (*client.Client, error) {
	if e.client == nil {
		c, err := client.Open(context.Background(), client.Config{Store: e.s, Transport: e.net, Directory: e.net})
		if err != nil {
			return nil, err
		}
		if err := c.Initialize(ctx, self); err != nil {
			return nil, err
		}
		e.client = c
	}
	if err := e.client.PublishBundle(ctx); err != nil {
		return nil, err
	}
	return e.client, nil
}

// cursor is where a page starts: after sequence After, for one recipient
// or (nil) all.
type cursor struct {
	after     int64
	recipient *store.DeviceAddress
}

// globalCursors draws k cursors uniformly over the whole sequence, each
// followed by at least a full page and its probe row.
func (e *env) globalCursors(rng *rand.Rand, k int) []cursor {
	out := make([]cursor, k)
	for j := range out {
		out[j] = cursor{after: int64(rng.IntN(e.n - store.MaxPageSize))}
	}
	return out
}

// recipientCursors draws k (recipient, cursor) pairs: a recipient
// uniformly among those holding at least a full page and its probe row
// (from a few hundred messages to hundreds of thousands), and a cursor
// uniformly over its whole queue, followed by a full page.
func (e *env) recipientCursors(rng *rand.Rand, k int) []cursor {
	eligible := e.layout.WithAtLeast(store.MaxPageSize + 1)
	out := make([]cursor, k)
	for j := range out {
		r := eligible[rng.IntN(len(eligible))]
		at := rng.IntN(e.layout.Share(r) - store.MaxPageSize)
		addr := e.layout.Address(r)
		out[j] = cursor{after: e.seq(e.layout.RecipientRow(r, at)) - 1, recipient: &addr}
	}
	return out
}

// page reads the page at c and checks it is full.
func (e *env) page(ctx context.Context, c cursor) error {
	p, err := e.s.PendingMessages(ctx, store.PageRequest{After: &c.after, Limit: store.MaxPageSize, Recipient: c.recipient})
	if err != nil {
		return err
	}
	if len(p.Messages) != store.MaxPageSize || p.NextAfterSequence == nil {
		return fmt.Errorf("%s: page after %d: %d messages", e.name, c.after, len(p.Messages))
	}
	return nil
}

func (e *env) pageAt(ctx context.Context, cs []cursor) func(int) error {
	return func(r int) error { return e.page(ctx, cs[r%len(cs)]) }
}
