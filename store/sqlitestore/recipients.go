package sqlitestore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

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
	if len(out) == 0 {
		out = nil // an empty page lists no recipient, not an empty list
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
	packed, err := q.PendingOutboundRecipients(ctx, db.PendingOutboundRecipientsParams{
		AfterUserID:   from.UserID,
		AfterDeviceID: from.DeviceID,
		RowLimit:      int64(n),
	})
	if err != nil {
		return nil, err
	}
	return unpackSeeks(packed, make([]store.PendingRecipient, 0, n))
}

// seekEntryHeader is the fixed-width head of an entry of
// PendingOutboundRecipients: device id (20), sequence (20), byte length
// of the user id (10).
const seekEntryHeader = 50

// unpackSeeks appends to out the recipients PendingOutboundRecipients
// packed back to back, each its seekEntryHeader digits, then its user id.
// The user ids are substrings of packed (no copy).
func unpackSeeks(packed string, out []store.PendingRecipient) ([]store.PendingRecipient, error) {
	for len(packed) > 0 {
		if len(packed) < seekEntryHeader {
			return nil, errMalformed("short entry")
		}
		device, err1 := parseInt(packed[:20])
		oldest, err2 := parseInt(packed[20:40])
		n, err3 := parseInt(packed[40:50])
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, errMalformed("number")
		}
		packed = packed[seekEntryHeader:]
		if n < 0 || n > int64(len(packed)) {
			return nil, errMalformed("user id length")
		}
		out = append(out, store.PendingRecipient{
			Recipient:      store.DeviceAddress{UserID: packed[:n], DeviceID: device},
			OldestSequence: oldest,
		})
		packed = packed[n:]
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
	entries, out, err := unpackRecipients(row.SameUser, make([]store.PendingRecipient, 0, n))
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
// PendingOutboundRecipientsScan ("E|D1,D2,...|S1,S2,...|N1,N2,...|U1U2...")
// and returns the index entries it read. The user ids are substrings of
// packed (no copy).
func unpackRecipients(packed string, out []store.PendingRecipient) (int64, []store.PendingRecipient, error) {
	var field [4]string
	for k := range field {
		i := strings.IndexByte(packed, '|')
		if i < 0 {
			return 0, nil, errMalformed("missing list")
		}
		field[k], packed = packed[:i], packed[i+1:]
	}
	entries, err := parseInt(field[0])
	if err != nil {
		return 0, nil, errMalformed("entry count")
	}
	devices, oldest, lengths, users := field[1], field[2], field[3], packed
	for len(devices) > 0 {
		var d, s, n int64
		var err1, err2, err3 error
		d, devices, err1 = nextInt(devices)
		s, oldest, err2 = nextInt(oldest)
		n, lengths, err3 = nextInt(lengths)
		if err1 != nil || err2 != nil || err3 != nil {
			return 0, nil, errMalformed("number")
		}
		if n < 0 || n > int64(len(users)) {
			return 0, nil, errMalformed("user id length")
		}
		out = append(out, store.PendingRecipient{
			Recipient:      store.DeviceAddress{UserID: users[:n], DeviceID: d},
			OldestSequence: s,
		})
		users = users[n:]
	}
	if oldest != "" || lengths != "" || users != "" {
		return 0, nil, errMalformed("lists of unequal length")
	}
	return entries, out, nil
}

// nextInt parses the first number of a comma-separated list and returns
// the rest of the list after it.
func nextInt(list string) (int64, string, error) {
	if list == "" {
		return 0, "", errMalformed("short list")
	}
	i := strings.IndexByte(list, ',')
	if i < 0 {
		v, err := parseInt(list)
		return v, "", err
	}
	if i == len(list)-1 {
		return 0, "", errMalformed("trailing comma")
	}
	v, err := parseInt(list[:i])
	return v, list[i+1:], err
}

// parseInt parses a decimal integer as SQLite prints one (an optional
// minus sign, then digits, zero-padded by printf's %0Nd).
func parseInt(s string) (int64, error) {
	return strconv.ParseInt(s, 10, 64)
}

// errMalformed reports a packed listing the store cannot read.
func errMalformed(what string) error {
	return fmt.Errorf("recipients: malformed listing (%s)", what)
}
