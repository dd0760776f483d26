package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/internal/testkit/benchseed"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// libraryFloorLines time what an application calls (the client) against
// its raw floor on the large database: the same generated query run
// straight on the store's connection, outside any transaction, with the
// same Keyring.Open calls. The ratio is the fixed cost the library adds
// per call; the first page, a small recipient's page, its count and an
// abandon are where that cost shows most.
func libraryFloorLines(b *bench) ([]result, error) {
	ctx, e := b.ctx, b.large
	c, err := e.theClient(ctx)
	if err != nil {
		return nil, err
	}
	small := nearestShare(e, 10)
	to, share := e.layout.Address(small), e.layout.Share(small)
	q := db.New(e.rawDB())
	var rs []result
	add := func(name string, limit float64, detail string, lib, raw func(int) error) error {
		a, f, err := interleave(b.o.Iters, lib, raw)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		rs = append(rs, ratioLE(name, a, f, limit, ", "+detail))
		return nil
	}
	err = add(fmt.Sprintf("first page of 100, all recipients / raw floor at %s", b.L), 1.2,
		"client.PendingMessages without a cursor; the floor: the same query, 100 Keyring.Open",
		func(int) error {
			p, err := c.PendingMessages(ctx, store.PageRequest{Limit: store.MaxPageSize})
			if err == nil && len(p.Messages) != store.MaxPageSize {
				err = fmt.Errorf("first page: %d messages", len(p.Messages))
			}
			return err
		},
		func(int) error { return rawRows(ctx, e, q, nil, store.MaxPageSize) })
	if err != nil {
		return nil, err
	}
	err = add(fmt.Sprintf("page of a recipient with %d messages / raw floor at %s", share, b.L), 1.3,
		"client.PendingMessages with Limit 100 (one page, all of them); the floor: the same query, the same opens",
		func(int) error {
			p, err := c.PendingMessages(ctx, store.PageRequest{Limit: store.MaxPageSize, Recipient: &to})
			if err == nil && len(p.Messages) != share {
				err = fmt.Errorf("recipient page: %d messages, want %d", len(p.Messages), share)
			}
			return err
		},
		func(int) error { return rawRows(ctx, e, q, &to, share) })
	if err != nil {
		return nil, err
	}
	err = add(fmt.Sprintf("count of a recipient with %d messages / raw floor at %s", share, b.L), 1.3,
		"client.PendingMessageCount; the floor: the same query",
		func(int) error {
			n, err := c.PendingMessageCount(ctx, &to)
			if err == nil && n != int64(share) {
				err = fmt.Errorf("count: %d, want %d", n, share)
			}
			return err
		},
		func(int) error {
			n, err := q.CountPendingOutboundForRecipient(ctx, db.CountPendingOutboundForRecipientParams{RecipientUserID: to.UserID, RecipientDeviceID: to.DeviceID})
			if err == nil && n != int64(share) {
				err = fmt.Errorf("raw count: %d, want %d", n, share)
			}
			return err
		})
	if err != nil {
		return nil, err
	}
	r, err := abandonFloorLine(b, q)
	if err != nil {
		return nil, err
	}
	return append(rs, r), nil
}

// nearestShare returns the recipient whose share of the messages is
// nearest to n.
func nearestShare(e *env, n int) int {
	best := 0
	for r, s := range e.layout.Shares() {
		if abs(s-n) < abs(e.layout.Share(best)-n) {
			best = r
		}
	}
	return best
}

// rawRows is the floor of a page from the start: the generated query
// for limit+1 rows on the store's connection, the first limit opened.
func rawRows(ctx context.Context, e *env, q *db.Queries, to *store.DeviceAddress, limit int) error {
	var rows []db.PagePendingOutboundRow
	if to == nil {
		rs, err := q.PagePendingOutbound(ctx, db.PagePendingOutboundParams{SealedLimit: storeimpl.MaxSealedMessageSize, FromSequence: math.MinInt64, RowLimit: int64(limit) + 1})
		if err != nil {
			return err
		}
		rows = rs
	} else {
		rs, err := q.PagePendingOutboundForRecipient(ctx, db.PagePendingOutboundForRecipientParams{
			SealedLimit:     storeimpl.MaxSealedMessageSize,
			RecipientUserID: to.UserID, RecipientDeviceID: to.DeviceID, FromSequence: math.MinInt64, RowLimit: int64(limit) + 1,
		})
		if err != nil {
			return err
		}
		for _, r := range rs {
			rows = append(rows, db.PagePendingOutboundRow(r))
		}
	}
	if len(rows) < limit {
		return fmt.Errorf("raw page: %d rows, want %d", len(rows), limit)
	}
	for _, r := range rows[:limit] {
		user, _ := r.RecipientUserID.(string)
		device, _ := r.RecipientDeviceID.(int64)
		lid, _ := r.LogicalID.([]byte)
		sealed, _ := r.Sealed.([]byte)
		if err := openRow(e, store.DeviceAddress{UserID: user, DeviceID: device}, lid, sealed); err != nil {
			return err
		}
	}
	return nil
}

// abandonFloorLine times client.Client.AbandonPending against the generated
// DELETE on the store's connection (a statement SQLite commits on its
// own), each on a different random victim of the large database. Both
// sides put a message back untimed: the library's through the store, the
// floor's through the generated INSERT on the same connection, so that
// the store's in-memory count stays right.
func abandonFloorLine(b *bench, q *db.Queries) (result, error) {
	ctx, e := b.ctx, b.large
	c, err := e.theClient(ctx)
	if err != nil {
		return result{}, err
	}
	vs := b.victims[e]
	iters := min(b.o.DMLIters, (e.n/2-len(vs.used))/2)
	lib := func(int) (time.Duration, error) {
		row, err := vs.take()
		if err != nil {
			return 0, err
		}
		to, id := e.layout.Row(row)
		d, err := timed(func() error {
			_, err := c.AbandonPending(ctx, to, id)
			return err
		})
		if err != nil {
			return 0, err
		}
		_, err = e.s.InsertPending(ctx, to, benchseed.ReplacementID(), benchseed.Plaintext(row, benchseed.DefaultPlaintextSize))
		return d, err
	}
	raw := func(int) (time.Duration, error) {
		row, err := vs.take()
		if err != nil {
			return 0, err
		}
		to, id := e.layout.Row(row)
		var n int64
		d, err := timed(func() error {
			var err error
			n, err = q.DeletePendingOutbound(ctx, db.DeletePendingOutboundParams{RecipientUserID: to.UserID, RecipientDeviceID: to.DeviceID, LogicalID: id[:]})
			return err
		})
		if err != nil || n != 1 {
			return 0, fmt.Errorf("raw delete of row %d: %d rows, %v", row, n, err)
		}
		nid := benchseed.ReplacementID()
		sealed, err := e.keys.Seal(seal.RecordPendingOutbound, seal.MessageAD(to.UserID, to.DeviceID, nid), benchseed.Plaintext(row, benchseed.DefaultPlaintextSize))
		if err != nil {
			return 0, err
		}
		_, err = q.InsertPendingOutbound(ctx, db.InsertPendingOutboundParams{RecipientUserID: to.UserID, RecipientDeviceID: to.DeviceID, LogicalID: nid[:], Sealed: sealed})
		return d, err
	}
	a, f, err := alternate(iters, nil, lib, raw)
	if err != nil {
		return result{}, fmt.Errorf("abandon floor: %w", err)
	}
	return ratioLE(fmt.Sprintf("abandon (client.AbandonPending) / raw floor at %s", b.L), a, f, 1.1,
		", random victims over the whole table, put back untimed; the floor: the same DELETE on the store's connection"), nil
}
