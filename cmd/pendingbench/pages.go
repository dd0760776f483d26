package main

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// spreadNote describes the recipients a per-recipient page is drawn from.
func spreadNote(e *env) string {
	el := e.layout.WithAtLeast(store.MaxPageSize + 1)
	lo, hi := e.layout.Share(el[0]), e.layout.Share(el[0])
	for _, r := range el {
		lo, hi = min(lo, e.layout.Share(r)), max(hi, e.layout.Share(r))
	}
	return fmt.Sprintf("%d recipients holding %d-%d", len(el), lo, hi)
}

func pageLines(b *bench) ([]result, error) {
	ctx, o := b.ctx, b.o
	a, c, err := interleave(o.Iters, b.large.pageAt(ctx, b.large.globalCursors(b.rng, o.Iters)), b.small.pageAt(ctx, b.small.globalCursors(b.rng, o.Iters)))
	if err != nil {
		return nil, err
	}
	rs := []result{ratioLE(fmt.Sprintf("page of 100, all recipients: %s / %s pending", b.L, b.S), a, c, 1.3,
		", random cursors over the whole sequence")}
	a, c, err = interleave(o.Iters, b.large.pageAt(ctx, b.large.recipientCursors(b.rng, o.Iters)), b.small.pageAt(ctx, b.small.recipientCursors(b.rng, o.Iters)))
	if err != nil {
		return nil, err
	}
	rs = append(rs, ratioLE(fmt.Sprintf("page of 100, one recipient: %s / %s pending", b.L, b.S), a, c, 1.3,
		fmt.Sprintf(", random recipient and cursor over its whole queue (%s / %s); %s at %s", spreadNote(b.large), spreadNote(b.small), a.spread(), b.L)))
	return rs, nil
}

func offsetLines(b *bench) ([]result, error) {
	// Each round and side draws its own position in the eighth of the
	// table below -offset-at: at one fixed position the keyset page would
	// read the same few pages every round, always cached.
	pos := int(float64(b.o.Large) * b.o.OffsetAt)
	lo := pos - pos/8
	draw := func() int { return lo + b.rng.IntN(pos-lo+1) }
	a, c, err := interleave(b.o.SlowIters, func(int) error { return offsetPage(b.ctx, b.large, draw()) },
		func(int) error { return b.large.page(b.ctx, cursor{after: int64(draw())}) })
	if err != nil {
		return nil, err
	}
	return []result{ratioGE(fmt.Sprintf("OFFSET page / keyset page at position %s", human(pos)), a, c, 50,
		fmt.Sprintf(", both 101 rows read, 100 opened, each at a random position in %d-%d", lo, pos))}, nil
}

func rawPageLines(b *bench) ([]result, error) {
	// Each side draws its own cursors: with one cursor for both, the
	// side going second would read the pages the first just cached.
	cs, raw := b.large.globalCursors(b.rng, b.o.Iters), b.large.globalCursors(b.rng, b.o.Iters)
	a, c, err := interleave(b.o.Iters, b.large.pageAt(b.ctx, cs), func(r int) error {
		return rawPage(b.ctx, b.large, raw[r%len(raw)].after)
	})
	if err != nil {
		return nil, err
	}
	return []result{ratioLE(fmt.Sprintf("page / (raw select 101 rows + 100 Keyring.Open) at %s", b.L), a, c, 1.5, ", random cursors over the whole sequence, drawn apart for each side")}, nil
}

// offsetPage is the baseline: the page at position pos read with OFFSET
// (101 rows, as the store reads limit+1), its 100 returned rows opened.
func offsetPage(ctx context.Context, e *env, pos int) error {
	rows, err := e.rawDB().QueryContext(ctx, `SELECT sequence, recipient_user_id, recipient_device_id, logical_id, sealed
FROM pending_outbound_message ORDER BY sequence LIMIT ? OFFSET ?`, store.MaxPageSize+1, pos)
	if err != nil {
		return err
	}
	return openRows(e, rows, pos)
}

// rawPage is the floor of a page: the keyset select of the same 101 rows
// straight on the connection, and 100 Keyring.Open calls.
func rawPage(ctx context.Context, e *env, after int64) error {
	rows, err := e.rawDB().QueryContext(ctx, `SELECT sequence, recipient_user_id, recipient_device_id, logical_id, sealed
FROM pending_outbound_message WHERE sequence > ? ORDER BY sequence LIMIT ?`, after, store.MaxPageSize+1)
	if err != nil {
		return err
	}
	return openRows(e, rows, int(after))
}

func openRows(e *env, rows *sql.Rows, firstRow int) error {
	defer rows.Close()
	n := 0
	for rows.Next() {
		var (
			seq    int64
			user   string
			device int64
			lid    []byte
			sealed []byte
		)
		if err := rows.Scan(&seq, &user, &device, &lid, &sealed); err != nil {
			return err
		}
		n++
		if n > store.MaxPageSize {
			continue // the probe row is read, not opened
		}
		if seq != int64(firstRow)+int64(n) {
			return fmt.Errorf("raw page: row %d has sequence %d", firstRow+n, seq)
		}
		var id ids.LogicalMessageID
		copy(id[:], lid)
		if _, err := e.keys.Open(seal.RecordPendingOutbound, store.MessageAD(ids.DeviceAddress{UserID: user, DeviceID: device}, id), sealed); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if n != store.MaxPageSize+1 {
		return fmt.Errorf("raw page: %d rows", n)
	}
	return rows.Close()
}
