package sqlitestore

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/store"
)

// scanEntriesPerRecipient sets the index entries a step through the
// recipient index may read for a page: this many per recipient the page
// asks for (limit + 1). Up to it, stepping over the entries costs less
// than the seeks of a loose index scan; a page whose recipients hold more
// goes on past the entries read by other means.
const scanEntriesPerRecipient = 4

// denseRecipientEntries is the density at which the listing stops
// stepping: a step that read its whole budget and found fewer recipients
// than one per this many entries meets recipients that hold more messages
// each than a seek past them costs, and the rest of the page is a loose
// index scan.
const denseRecipientEntries = 16

// PendingRecipients implements store.Pending. It chooses its strategy by
// what it meets in the recipient index (pending_outbound_message_recipient):
// first it steps through the entries after the cursor in order, as SELECT
// DISTINCT would, but for at most scanEntriesPerRecipient per recipient
// asked for (the query PendingOutboundRecipientsScan, one statement). Most
// pages end there. If the entries read end inside a recipient before the
// page is full, the page is read again in one transaction (one snapshot),
// going on past that recipient: by another bounded step while recipients
// hold few messages each, or by a loose index scan, a few seeks per
// recipient whatever it holds (PendingOutboundRecipients), once a step
// finds them dense. A page dense from its cursor on is the loose index
// scan alone, one statement. No message is opened; no planner statistic is read.
func (s *Store) PendingRecipients(ctx context.Context, req store.RecipientPageRequest) (store.PendingRecipientPage, error) {
	if err := req.Validate(); err != nil {
		return store.PendingRecipientPage{}, storeimpl.OpPendingRecipients.Wrap(err)
	}
	from := storeimpl.RecipientsFrom(req)
	need := req.Limit + 1
	budget := int64(scanEntriesPerRecipient * need)
	var out []store.PendingRecipient
	more := false
	err := s.tx(ctx, statement, func(q *txn) error {
		var err error
		out, more, err = scanRecipients(ctx, q, from, need, budget)
		return err
	})
	switch {
	case err != nil || !more:
	case int64(len(out))*denseRecipientEntries <= budget:
		// Dense from the cursor on: the loose index scan reads the
		// whole page, one statement.
		err = s.tx(ctx, statement, func(q *txn) error {
			var err error
			out, err = seekRecipients(ctx, q, from, need)
			return err
		})
	default:
		err = s.tx(ctx, transaction, func(q *txn) error {
			var err error
			out, err = listRecipients(ctx, q, from, need, budget)
			return err
		})
	}
	if err != nil {
		return store.PendingRecipientPage{}, storeimpl.OpPendingRecipients.Wrap(err)
	}
	return storeimpl.RecipientPage(out, req.Limit), nil
}

// listRecipients reads up to need recipients after from: bounded steps
// through the index, each going on past the recipient the one before
// stopped in, until the page is full, the index ends, or a step finds
// recipients dense (fewer than one per denseRecipientEntries entries read);
// then the loose index scan reads the rest.
func listRecipients(ctx context.Context, q *txn, from store.DeviceAddress, need int, budget int64) ([]store.PendingRecipient, error) {
	var out []store.PendingRecipient
	for {
		got, more, err := scanRecipients(ctx, q, from, need-len(out), budget)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
		if !more || len(got) == 0 {
			return out, nil
		}
		from = out[len(out)-1].Recipient
		if int64(len(got))*denseRecipientEntries <= budget {
			rest, err := seekRecipients(ctx, q, from, need-len(out))
			return append(out, rest...), err
		}
	}
}

// seekRecipients is the loose index scan: up to n recipients after from.
func seekRecipients(ctx context.Context, q *txn, from store.DeviceAddress, n int) ([]store.PendingRecipient, error) {
	rows, err := q.PendingOutboundRecipients(ctx, db.PendingOutboundRecipientsParams{
		AfterUserID:   from.UserID,
		AfterDeviceID: from.DeviceID,
		RowLimit:      int64(n),
	})
	if err != nil {
		return nil, err
	}
	out := make([]store.PendingRecipient, 0, len(rows))
	for _, r := range rows {
		out = append(out, store.PendingRecipient{
			Recipient:      store.DeviceAddress{UserID: r.RecipientUserID, DeviceID: r.RecipientDeviceID},
			OldestSequence: r.OldestSequence,
		})
	}
	return out, nil
}

// scanRecipients runs one bounded step (PendingOutboundRecipientsScan):
// up to n recipients after from, read from at most budget index entries
// per range. more reports that the step stopped on its budget before it
// found n: the last recipient returned may hold more entries, and the
// page goes on after it.
func scanRecipients(ctx context.Context, q *txn, from store.DeviceAddress, n int, budget int64) (out []store.PendingRecipient, more bool, err error) {
	row, err := q.PendingOutboundRecipientsScan(ctx, db.PendingOutboundRecipientsScanParams{
		AfterUserID:   from.UserID,
		AfterDeviceID: from.DeviceID,
		EntryLimit:    budget,
		RowLimit:      int64(n),
	})
	if err != nil {
		return nil, false, err
	}
	entries, out, err := unpackRecipients(row.SameUser, nil)
	if err != nil {
		return nil, false, err
	}
	if len(out) >= n {
		return out[:n], false, nil
	}
	if entries >= budget {
		// The cursor's user holds more: the later users come after it.
		return out, true, nil
	}
	entries, out, err = unpackRecipients(row.LaterUsers, out)
	if err != nil {
		return nil, false, err
	}
	if len(out) >= n {
		return out[:n], false, nil
	}
	return out, entries >= budget, nil
}

// unpackRecipients appends to out the recipients of one range packed by
// PendingOutboundRecipientsScan ("E|D,S,N;...|U1U2...") and returns the
// index entries it read.
func unpackRecipients(packed string, out []store.PendingRecipient) (int64, []store.PendingRecipient, error) {
	bad := func(what string) error {
		return fmt.Errorf("recipients: malformed listing (%s)", what)
	}
	p := []byte(packed)
	i := bytes.IndexByte(p, '|')
	if i < 0 {
		return 0, nil, bad("no entry count")
	}
	entries, err := strconv.ParseInt(string(p[:i]), 10, 64)
	if err != nil {
		return 0, nil, bad("entry count")
	}
	p = p[i+1:]
	j := bytes.IndexByte(p, '|')
	if j < 0 {
		return 0, nil, bad("no user ids")
	}
	nums, users := p[:j], p[j+1:]
	for len(nums) > 0 {
		var f [3]int64
		for k := range f {
			end := len(nums)
			sep := byte(',')
			if k == 2 {
				sep = ';'
			}
			if e := bytes.IndexByte(nums, sep); e >= 0 {
				end = e
			} else if k < 2 {
				return 0, nil, bad("short record")
			}
			f[k], err = strconv.ParseInt(string(nums[:end]), 10, 64)
			if err != nil {
				return 0, nil, bad("number")
			}
			nums = nums[min(end+1, len(nums)):]
		}
		if f[2] < 0 || f[2] > int64(len(users)) {
			return 0, nil, bad("user id length")
		}
		out = append(out, store.PendingRecipient{
			Recipient:      store.DeviceAddress{UserID: string(users[:f[2]]), DeviceID: f[0]},
			OldestSequence: f[1],
		})
		users = users[f[2]:]
	}
	if len(users) != 0 {
		return 0, nil, bad("trailing user ids")
	}
	return entries, out, nil
}
