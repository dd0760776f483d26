package main

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/storeimpl"
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
	// No target: each of a sparse recipient's rows is its own b-tree
	// descent, which grows with the table whatever the store does (the
	// in-memory floor shows it). What the store controls is judged
	// against the same query on the raw connection (rawPageLines).
	r := ratioLE(fmt.Sprintf("page of 100, one recipient: %s / %s pending", b.L, b.S), a, c, 0,
		fmt.Sprintf(", random recipient and cursor over its whole queue (%s / %s); %s at %s", spreadNote(b.large), spreadNote(b.small), a.spread(), b.L))
	r.Info, r.Target, r.Pass = true, "-", false
	return append(rs, r), nil
}

func offsetLines(b *bench) ([]result, error) {
	// Each round and side draws its own position: at one fixed position
	// the keyset page would read the same few pages every round, always
	// cached.
	lo, pos := offsetRange(b.large.n, b.o.OffsetAt)
	draw := func() int { return lo + b.rng.IntN(pos-lo+1) }
	a, c, err := interleave(b.o.SlowIters, func(int) error { return offsetPage(b.ctx, b.large, draw()) },
		func(int) error { return b.large.page(b.ctx, cursor{after: int64(draw())}) })
	if err != nil {
		return nil, err
	}
	return []result{ratioGE(fmt.Sprintf("OFFSET page / keyset page at position %s", human(pos)), a, c, 50,
		fmt.Sprintf(", both 101 rows read, 100 opened, each at a random position in %d-%d", lo, pos))}, nil
}

// offsetRange is where the OFFSET pages of a table of n rows are drawn:
// the eighth of the table below the fraction at of it, ending at most a
// page and its probe row before the end.
func offsetRange(n int, at float64) (lo, hi int) {
	hi = min(int(float64(n)*at), n-store.MaxPageSize-1)
	return hi - hi/8, hi
}

// rawPageLines compare the store's page with its floor on the large
// database: the same generated query on the same connection, outside any
// transaction, and the same 100 Keyring.Open calls (rawPage). What is
// left between the two is what the store adds: its transaction, the
// cursor check, the storage-class checks and the page's assembly. The
// per-recipient line is the one the library controls of the page whose
// 1M / 1k ratio the schema bounds (see floorLines).
func rawPageLines(b *bench) ([]result, error) {
	var rs []result
	for _, kind := range []struct {
		name    string
		limit   float64
		cursors func(k int) []cursor
		detail  string
	}{
		{"all recipients", 1.2, func(k int) []cursor { return b.large.globalCursors(b.rng, k) }, "random cursors over the whole sequence"},
		{"one recipient", 1.3, func(k int) []cursor { return b.large.recipientCursors(b.rng, k) }, "random recipient and cursor over its whole queue"},
	} {
		// Each side draws its own cursors: with one cursor for both, the
		// side going second would read the pages the first just cached.
		cs, raw := kind.cursors(b.o.Iters), kind.cursors(b.o.Iters)
		// Each side counts the records it opens: the two must open the
		// same number for the ratio to compare what it claims to.
		var opened [2]int64
		counted := func(side int, f func(int) error) func(int) error {
			return func(r int) error {
				before := b.large.keys.Opens()
				err := f(r)
				opened[side] += b.large.keys.Opens() - before
				return err
			}
		}
		a, c, err := interleave(b.o.Iters, counted(0, b.large.pageAt(b.ctx, cs)), counted(1, func(r int) error {
			return rawPage(b.ctx, b.large, raw[r%len(raw)])
		}))
		if err != nil {
			return nil, err
		}
		res := ratioLE(fmt.Sprintf("page of 100, %s / same query raw + 100 Keyring.Open at %s", kind.name, b.L), a, c, kind.limit,
			fmt.Sprintf(", %s, drawn apart for each side; the generated query on the store's connection, no transaction; %d / %d records opened",
				kind.detail, opened[0], opened[1]))
		if opened[0] != opened[1] {
			res.Pass = false
			res.Detail += " (not the same: FAIL)"
		}
		rs = append(rs, res)
	}
	return rs, nil
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

// rawPage is the floor of the page at c: the store's own generated query
// (internal/db, compiled by sqlc from queries/) for the same 101 rows, run
// straight on the store's connection outside any transaction, and
// Keyring.Open on the 100 rows a page returns, as the store opens them.
// It checks that the rows are the page asked for.
func rawPage(ctx context.Context, e *env, c cursor) error {
	q := db.New(e.rawDB())
	from, limit := c.after+1, int64(store.MaxPageSize+1)
	var rows []db.PagePendingOutboundRow
	if c.recipient == nil {
		rs, err := q.PagePendingOutbound(ctx, db.PagePendingOutboundParams{SealedLimit: storeimpl.MaxSealedMessageSize, FromSequence: from, RowLimit: limit})
		if err != nil {
			return err
		}
		rows = rs
	} else {
		rs, err := q.PagePendingOutboundForRecipient(ctx, db.PagePendingOutboundForRecipientParams{
			SealedLimit:     storeimpl.MaxSealedMessageSize,
			RecipientUserID: c.recipient.UserID, RecipientDeviceID: c.recipient.DeviceID, FromSequence: from, RowLimit: limit,
		})
		if err != nil {
			return err
		}
		for _, r := range rs {
			rows = append(rows, db.PagePendingOutboundRow(r))
		}
	}
	if len(rows) != store.MaxPageSize+1 {
		return fmt.Errorf("%s: raw page after %d: %d rows", e.name, c.after, len(rows))
	}
	for _, r := range rows[:store.MaxPageSize] { // the probe row is read, not opened
		user, okU := r.RecipientUserID.(string)
		device, okD := r.RecipientDeviceID.(int64)
		lid, okL := r.LogicalID.([]byte)
		sealed, okS := r.Sealed.([]byte)
		if !okU || !okD || !okL || !okS {
			return fmt.Errorf("%s: raw page: row %d has columns of another storage class", e.name, r.Sequence)
		}
		to := store.DeviceAddress{UserID: user, DeviceID: device}
		if c.recipient != nil && to != *c.recipient {
			return fmt.Errorf("%s: raw page: row %d is for %s, not %s", e.name, r.Sequence, to, *c.recipient)
		}
		if err := openRow(e, to, lid, sealed); err != nil {
			return err
		}
	}
	return nil
}

// openRow opens one sealed pending row as the store does.
func openRow(e *env, to store.DeviceAddress, lid, sealed []byte) error {
	var id store.LogicalMessageID
	copy(id[:], lid)
	_, err := e.keys.Open(seal.RecordPendingOutbound, seal.MessageAD(to.UserID, to.DeviceID, id), sealed)
	return err
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
		if err := openRow(e, store.DeviceAddress{UserID: user, DeviceID: device}, lid, sealed); err != nil {
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
