package sqlitestore

import (
	"context"
	"fmt"
	"strings"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/store"
)

// denseRecipientEntries is the density at which the listing seeks rather
// than steps: where recipients hold this many index entries each, two seeks
// past each one cost about what stepping over its entries does. A page
// whose first recipient after the cursor holds this many is read by seeks.
const denseRecipientEntries = 16

// PendingRecipients implements store.Pending. It chooses its strategy by
// what it meets in the recipient index (pending_outbound_message_recipient),
// in one statement (PendingOutboundRecipientsScan): it probes whether the
// first recipient after the cursor, on the cursor's user and after it,
// holds denseRecipientEntries entries (the first that many entries of the
// range are all its own); if not, it steps through the entries after the
// cursor in order, as SELECT DISTINCT would, and groups them by
// recipient: most pages end there, at
// about four fifths of DISTINCT's cost, whatever they meet after the
// probe (a recipient there that holds many is stepped over entry by entry,
// as DISTINCT steps over it; bounding the step, a LIMIT in a subquery,
// costs a third more on every entry of every page). A page the probe finds
// dense is read by the loose index scan, two seeks per recipient whatever
// it holds (PendingOutboundRecipients), in a statement of its own. Either
// way the page returned is what one statement read (one snapshot), and no
// transaction is begun. No message is opened; no planner statistic is read.
func (s *Store) PendingRecipients(ctx context.Context, req store.RecipientPageRequest) (store.PendingRecipientPage, error) {
	if err := req.Validate(); err != nil {
		return store.PendingRecipientPage{}, storeimpl.OpPendingRecipients.Wrap(err)
	}
	from := storeimpl.RecipientsFrom(req)
	need := req.Limit + 1
	var out []store.PendingRecipient
	full := false
	err := s.tx(ctx, statement, func(q *txn) error {
		var err error
		out, full, err = scanRecipients(ctx, q, from, need)
		return err
	})
	if err == nil && !full {
		err = s.tx(ctx, statement, func(q *txn) error {
			var err error
			out, err = seekRecipients(ctx, q, from, need)
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

// scanRecipients runs the probe and the step through the index
// (PendingOutboundRecipientsScan) for up to n recipients after from. full
// reports that the recipients returned are the page: n of them, or every
// one after from. Otherwise a probe found the first recipient of a range it
// was to read dense, and the page is to be read by seeks.
func scanRecipients(ctx context.Context, q *txn, from store.DeviceAddress, n int) (out []store.PendingRecipient, full bool, err error) {
	row, err := q.PendingOutboundRecipientsScan(ctx, db.PendingOutboundRecipientsScanParams{
		AfterUserID:   from.UserID,
		AfterDeviceID: from.DeviceID,
		RowLimit:      int64(n),
		DenseEntries:  denseRecipientEntries,
	})
	if err != nil {
		return nil, false, err
	}
	if row.SameUser == "" {
		return nil, false, nil
	}
	out, err = unpackRecipients(row.SameUser, make([]store.PendingRecipient, 0, n))
	switch {
	case err != nil:
		return nil, false, err
	case len(out) >= n:
		return out[:n], true, nil
	case row.LaterUsers == "":
		return nil, false, nil
	}
	out, err = unpackRecipients(row.LaterUsers, out)
	if err != nil {
		return nil, false, err
	}
	return out[:min(n, len(out))], true, nil
}

// unpackRecipients appends to out the recipients of one range packed by
// PendingOutboundRecipientsScan ("D1,D2,...|S1,S2,...|N1,N2,...|U1U2...").
// The user ids are substrings of packed (no copy).
func unpackRecipients(packed string, out []store.PendingRecipient) ([]store.PendingRecipient, error) {
	var field [3]string
	for k := range field {
		i := strings.IndexByte(packed, '|')
		if i < 0 {
			return nil, errMalformed("missing list")
		}
		field[k], packed = packed[:i], packed[i+1:]
	}
	devices, oldest, lengths, users := field[0], field[1], field[2], packed
	for len(devices) > 0 {
		var d, s, n int64
		var err1, err2, err3 error
		d, devices, err1 = nextInt(devices)
		s, oldest, err2 = nextInt(oldest)
		n, lengths, err3 = nextInt(lengths)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, errMalformed("number")
		}
		if n < 0 || n > int64(len(users)) {
			return nil, errMalformed("user id length")
		}
		out = append(out, store.PendingRecipient{
			Recipient:      store.DeviceAddress{UserID: users[:n], DeviceID: d},
			OldestSequence: s,
		})
		users = users[n:]
	}
	if oldest != "" || lengths != "" || users != "" {
		return nil, errMalformed("lists of unequal length")
	}
	return out, nil
}

// nextInt parses the number at the start of a comma-separated list and
// returns the rest of the list after it.
func nextInt(list string) (int64, string, error) {
	v, n, err := leadingInt(list)
	switch {
	case err != nil:
		return 0, "", err
	case n == len(list):
		return v, "", nil
	case list[n] != ',' || n+1 == len(list):
		return 0, "", errMalformed("list separator")
	}
	return v, list[n+1:], nil
}

// parseInt parses s, all of it one decimal integer.
func parseInt(s string) (int64, error) {
	v, n, err := leadingInt(s)
	if err == nil && n != len(s) {
		err = errMalformed("number")
	}
	return v, err
}

// leadingInt parses the decimal integer at the start of s as SQLite
// prints one (an optional minus sign, then digits, zero-padded by
// printf's %0Nd) and returns it and the bytes it took. strconv.ParseInt
// would need the number's end first and costs a third of a page's parse.
func leadingInt(s string) (int64, int, error) {
	i, neg := 0, false
	if i < len(s) && s[i] == '-' {
		i, neg = 1, true
	}
	start := i
	var u uint64
	for ; i < len(s); i++ {
		d := s[i] - '0'
		if d > 9 {
			break
		}
		if u > (1<<63)/10 {
			return 0, 0, errMalformed("number out of range")
		}
		u = u*10 + uint64(d)
	}
	switch {
	case i == start:
		return 0, 0, errMalformed("number")
	case neg && u <= 1<<63:
		return -int64(u), i, nil // -(1<<63) wraps to itself
	case !neg && u <= 1<<63-1:
		return int64(u), i, nil
	}
	return 0, 0, errMalformed("number out of range")
}

// errMalformed reports a packed listing the store cannot read.
func errMalformed(what string) error {
	return fmt.Errorf("recipients: malformed listing (%s)", what)
}
