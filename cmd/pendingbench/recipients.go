package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/store"
)

// Targets of the recipient lines: the listing against SELECT DISTINCT
// over the same index on the same connection. Without ANALYZE statistics
// (a client's database has none) DISTINCT steps over every index entry of
// the recipients it passes: O(pending) for the whole list. The listing
// probes the first recipient after the cursor (are the first 16 index
// entries all its own?): where it holds fewer, it steps through a window
// of the index too, grouped by recipient, and hands the page to the
// driver as one packed row (not one row per recipient); a recipient
// holding many met inside the window ends it, and the next statement
// seeks past it; where the first holds more, it seeks past each
// recipient, two seeks whatever it holds, while they stay dense. So it is
// held to DISTINCT's cost where DISTINCT is cheapest (recipients of ~1-10
// messages: 10,000 and 100,000 recipients, a page of 100 after a random
// recipient and the whole list, <= 1.1, also with the large recipients
// anywhere in address order), and to a fraction of it where recipients
// hold many (1,000 recipients of ~1,000 messages: the whole list <= 0.2,
// a page after a random recipient, mostly in the skewed layout's tail,
// <= 1.5; one recipient holding everything: the whole list, which
// DISTINCT reads entry by entry, <= 0.1, and the empty page after it
// <= 1.5).
type recipientTargets struct{ page, all float64 } // 0: an info line

var (
	recipientsFewTarget  = recipientTargets{page: 1.5, all: 0.2} // -recipients
	recipientsMidTarget  = recipientTargets{page: 1.1, all: 1.1} // midRecipients
	recipientsManyTarget = recipientTargets{page: 1.1, all: 1.1} // -many-recipients
	recipientsOneTarget  = recipientTargets{page: 1.5, all: 0.1} // one recipient
	// The -recipients shares with the large recipients anywhere in address
	// order: the same targets as in the skewed layout, whose order puts
	// them first.
	recipientsScatteredTarget = recipientTargets{page: 1.5, all: 0.2}
)

// midRecipients is the recipients of the shape between -recipients and
// -many-recipients (at most a tenth of -large).
const midRecipients = 10_000

// recipientRatio is ratioLE, or an info line if limit is 0.
func recipientRatio(name string, a, b sample, limit float64, detail string) result {
	r := ratioLE(name, a, b, limit, detail)
	r.Info = limit == 0
	return r
}

// recipientLines compare the recipient listing (store PendingRecipients,
// a loose index scan of the recipient index) with the raw floor, SELECT
// DISTINCT over the same index on the store's own connection, at -large
// pending over -recipients recipients (the large database) and over
// -many-recipients: a page of 100
// after a random recipient (against DISTINCT ... LIMIT 101 after it), and
// the whole listing, page by page, as a restart loop reads it (against one
// SELECT DISTINCT of every recipient); also over midRecipients and over a
// single recipient holding every message (databases seeded for these
// lines), and over -recipients recipients with the same shares in a
// pseudo-random address order (scattered: a large recipient anywhere,
// where the skewed layout puts them first). Before timing, the store's
// answers are checked against DISTINCT's.
func recipientLines(b *bench) ([]result, error) {
	ctx, o := b.ctx, b.o
	many, err := b.seedOver("many", o.Large, o.ManyRecipients)
	if err != nil {
		return nil, err
	}
	defer many.s.Close()
	mid, err := b.seedOver("mid-recipients", o.Large, midRecipients)
	if err != nil {
		return nil, err
	}
	defer mid.s.Close()
	one, err := b.seedOver("one-recipient", o.Large, 1)
	if err != nil {
		return nil, err
	}
	defer one.s.Close()
	scattered, err := b.seedScattered("scattered", o.Large, o.Recipients)
	if err != nil {
		return nil, err
	}
	defer scattered.s.Close()
	manyScattered, err := b.seedScattered("many-scattered", o.Large, o.ManyRecipients)
	if err != nil {
		return nil, err
	}
	defer manyScattered.s.Close()
	var rs []result
	for _, x := range []struct {
		e      *env
		target recipientTargets
		how    string
	}{{b.large, recipientsFewTarget, ""}, {mid, recipientsMidTarget, ""}, {many, recipientsManyTarget, ""}, {one, recipientsOneTarget, ""},
		{scattered, recipientsScatteredTarget, " scattered"}, {manyScattered, recipientsManyTarget, " scattered"}} {
		e := x.e
		n := e.layout.Recipients()
		at := fmt.Sprintf("at %s over %s%s recipients", b.L, human(n), x.how)
		cursors := make([]store.DeviceAddress, o.Iters)
		for i := range cursors {
			cursors[i] = e.layout.Address(b.rng.IntN(n))
		}
		for _, c := range cursors[:min(len(cursors), 5)] {
			if err := checkRecipientPage(ctx, e, c); err != nil {
				return nil, err
			}
		}
		storePage := func(round int) error {
			_, err := e.s.PendingRecipients(ctx, store.RecipientPageRequest{After: &cursors[round], Limit: store.MaxPageSize})
			return err
		}
		rawPage := func(round int) error {
			_, err := distinctRecipients(ctx, e, &cursors[round], store.MaxPageSize+1)
			return err
		}
		a, c, err := interleave(o.Iters, storePage, rawPage)
		if err != nil {
			return nil, err
		}
		rs = append(rs, recipientRatio("recipients, page of 100 / SELECT DISTINCT "+at, a, c, x.target.page,
			", after a random recipient; DISTINCT reads up to 101 addresses, the store as many with their oldest sequences"))

		listed := 0
		storeAll := func(int) error {
			req := store.RecipientPageRequest{Limit: store.MaxPageSize}
			listed = 0
			for {
				p, err := e.s.PendingRecipients(ctx, req)
				if err != nil {
					return err
				}
				listed += len(p.Recipients)
				if p.NextAfterRecipient == nil {
					break
				}
				req.After = p.NextAfterRecipient
			}
			if listed != n {
				return fmt.Errorf("%s: listed %d recipients, want %d", e.name, listed, n)
			}
			return nil
		}
		rawAll := func(int) error {
			got, err := distinctRecipients(ctx, e, nil, -1)
			if err == nil && len(got) != n {
				err = fmt.Errorf("%s: DISTINCT found %d recipients, want %d", e.name, len(got), n)
			}
			return err
		}
		a, c, err = interleave(o.SlowIters, storeAll, rawAll)
		if err != nil {
			return nil, err
		}
		rs = append(rs, recipientRatio("recipients, every one / SELECT DISTINCT "+at, a, c, x.target.all,
			fmt.Sprintf(", %d pages of 100 (a statement or more each: one more per window ended early, per dense stretch) against one statement", (n+store.MaxPageSize-1)/store.MaxPageSize)))
	}
	return rs, nil
}

// distinctRecipients is the raw floor: the distinct recipients after the
// cursor (nil: all), in address order, at most limit (-1: no limit), read
// by SELECT DISTINCT over the recipient index on e's connection.
func distinctRecipients(ctx context.Context, e *env, after *store.DeviceAddress, limit int) ([]store.DeviceAddress, error) {
	from := storeimpl.RecipientsFrom(store.RecipientPageRequest{After: after})
	rows, err := e.rawDB().QueryContext(ctx, `SELECT DISTINCT recipient_user_id, recipient_device_id
		FROM pending_outbound_message
		WHERE (recipient_user_id, recipient_device_id) > (?, ?)
		ORDER BY recipient_user_id, recipient_device_id LIMIT ?`, from.UserID, from.DeviceID, limit)
	if err != nil {
		return nil, fmt.Errorf("%s: select distinct: %w", e.name, err)
	}
	defer rows.Close()
	var out []store.DeviceAddress
	for rows.Next() {
		var a store.DeviceAddress
		if err := rows.Scan(&a.UserID, &a.DeviceID); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// checkRecipientPage checks that the store's page after the cursor lists
// what SELECT DISTINCT finds, and that each oldest sequence is that
// recipient's first row in the seeded layout.
func checkRecipientPage(ctx context.Context, e *env, after store.DeviceAddress) error {
	p, err := e.s.PendingRecipients(ctx, store.RecipientPageRequest{After: &after, Limit: store.MaxPageSize})
	if err != nil {
		return err
	}
	want, err := distinctRecipients(ctx, e, &after, store.MaxPageSize)
	if err != nil {
		return err
	}
	var got []store.DeviceAddress
	for _, r := range p.Recipients {
		got = append(got, r.Recipient)
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("%s: recipients after %s: store lists %d, DISTINCT %d, or in another order", e.name, after, len(got), len(want))
	}
	first := map[store.DeviceAddress]int64{}
	for r := range e.layout.Recipients() {
		first[e.layout.Address(r)] = e.seq(e.layout.RecipientRow(r, 0))
	}
	for _, r := range p.Recipients {
		if r.OldestSequence != first[r.Recipient] {
			return fmt.Errorf("%s: %s: oldest sequence %d, want %d", e.name, r.Recipient, r.OldestSequence, first[r.Recipient])
		}
	}
	return nil
}
