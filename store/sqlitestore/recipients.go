package sqlitestore

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/store"
)

// denseRecipientEntries is the density at which the listing seeks rather
// than steps: where recipients hold this many index entries each, two seeks
// past each one cost about what stepping over its entries does.
const denseRecipientEntries = 16

// sparseRun is how many recipients in a row holding fewer than
// denseRecipientEntries the seeks pass before they hand the page back to
// the step: one such recipient costs the seeks a little more than the
// step would, a run of them more than a statement of the step costs.
const sparseRun = 4

// lookAheadPerRecipient bounds what a statement of the step reads: a
// window of this many index entries per recipient it is to return (plus
// denseRecipientEntries, so that the first recipient, which the probe
// found sparse, always ends inside it). A page of recipients holding
// fewer on average is one statement; a recipient holding many is read
// only to the window's end, and the next statement seeks past it.
const lookAheadPerRecipient = 4

// PendingRecipients implements store.Pending. It chooses its strategy by
// what it meets in the recipient index (pending_outbound_message_recipient),
// statement by statement; no planner statistic is read. A statement of the
// step (PendingOutboundRecipientsScan) probes whether the first recipient
// after the cursor holds denseRecipientEntries entries (the first that
// many entries are all its own); if not, it steps through a window of the
// entries after the cursor in order, as SELECT DISTINCT would, grouped by
// recipient: where recipients hold a few messages each, the page ends
// there. Where the window ran out first (a recipient holding many, met
// after the first), the next statement goes on after the last recipient
// listed, seeking past the rest of it. Where the probe finds the first
// recipient dense, the seeks (PendingOutboundRecipients, a loose index
// scan: two seeks per recipient whatever it holds) go on from there while
// the recipients they meet are dense, and hand the rest of the page back
// to the step after sparseRun sparse ones in a row. Each statement reads
// one snapshot; a page read by several lists each recipient once, in
// order, as the statement that read it found it. No message is opened and
// no transaction is begun.
func (s *Store) PendingRecipients(ctx context.Context, req store.RecipientPageRequest) (store.PendingRecipientPage, error) {
	if err := req.Validate(); err != nil {
		return store.PendingRecipientPage{}, storeimpl.OpPendingRecipients.Wrap(err)
	}
	need := req.Limit + 1
	out := make([]store.PendingRecipient, 0, need)
	err := s.tx(ctx, statement, func(q *txn) error {
		var err error
		out, err = listRecipients(ctx, q, storeimpl.RecipientsFrom(req), need, out)
		return err
	})
	if err != nil {
		return store.PendingRecipientPage{}, storeimpl.OpPendingRecipients.Wrap(err)
	}
	if len(out) == 0 {
		out = nil // an empty page lists no recipient, not an empty list
	}
	return storeimpl.RecipientPage(out, req.Limit), nil
}

// listRecipients appends to out up to need recipients after from, by
// statements of the step and of the seeks, each going on after the last
// recipient the one before it listed.
func listRecipients(ctx context.Context, q *txn, from store.DeviceAddress, need int, out []store.PendingRecipient) ([]store.PendingRecipient, error) {
	for len(out) < need {
		n := len(out)
		var next nextRead
		var err error
		if out, next, err = stepRecipients(ctx, q, from, need-n, out); err != nil {
			return nil, err
		}
		if len(out) > n {
			from = out[len(out)-1].Recipient
		}
		switch {
		case next == readDone:
			return out, nil
		case next == readStep && len(out) > n:
			continue
		}
		// The probe found the next recipient dense (or a window that
		// listed no recipient, which the window's size rules out: this
		// only keeps the loop going forward).
		n = len(out)
		if out, err = seekRecipients(ctx, q, from, need-n, out); err != nil {
			return nil, err
		}
		if len(out) == n {
			return out, nil // no recipient after from
		}
		from = out[len(out)-1].Recipient
	}
	return out, nil
}

// nextRead says how a page goes on after a statement of the step.
type nextRead int

const (
	readDone nextRead = iota // the page is complete, or no recipient follows
	readStep                 // the window ran out, or the range may have: step on after the last recipient
	readSeek                 // the next recipient is dense: seek
)

// seekRecipients is the loose index scan: up to n recipients after from,
// appended to out, fewer if it met sparseRun sparse recipients in a row.
func seekRecipients(ctx context.Context, q *txn, from store.DeviceAddress, n int, out []store.PendingRecipient) ([]store.PendingRecipient, error) {
	packed, err := q.PendingOutboundRecipients(ctx, db.PendingOutboundRecipientsParams{
		AfterUserID:   from.UserID,
		AfterDeviceID: from.DeviceID,
		RowLimit:      int64(n),
		DenseEntries:  denseRecipientEntries,
		SparseRun:     sparseRun,
	})
	if err != nil {
		return nil, err
	}
	return unpackSeeks(packed, out)
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

// stepRecipients runs a statement of the step
// (PendingOutboundRecipientsScan) for up to n recipients after from and
// appends what it listed to out; next says how the page goes on.
func stepRecipients(ctx context.Context, q *txn, from store.DeviceAddress, n int, out []store.PendingRecipient) ([]store.PendingRecipient, nextRead, error) {
	window := lookAheadPerRecipient*n + denseRecipientEntries
	row, err := q.PendingOutboundRecipientsScan(ctx, db.PendingOutboundRecipientsScanParams{
		AfterUserID:   from.UserID,
		AfterDeviceID: from.DeviceID,
		RowLimit:      int64(n),
		DenseEntries:  denseRecipientEntries,
		LookAhead:     int64(window),
	})
	if err != nil {
		return nil, readDone, err
	}
	end := len(out) + n
	if row.SameUser == "" {
		return out, readSeek, nil
	}
	var read int64
	if out, read, err = unpackRecipients(row.SameUser, true, out); err != nil {
		return nil, readDone, err
	}
	switch {
	case len(out) >= end:
		return out[:end], readDone, nil
	case read >= int64(window):
		// The window ended the range: its last recipient may hold more
		// entries than it read, which the next statement seeks past.
		return out, readStep, nil
	case row.LaterUsers == "":
		return out, readSeek, nil
	}
	n0 := len(out)
	if out, _, err = unpackRecipients(row.LaterUsers, false, out); err != nil {
		return nil, readDone, err
	}
	switch {
	case len(out) >= end:
		return out[:end], readDone, nil
	case len(out) == n0:
		return out, readDone, nil // no recipient after the cursor's user
	}
	// Fewer than wanted: the window ended the range (or the range did,
	// which the next statement finds).
	return out, readStep, nil
}

// unpackRecipients appends to out the recipients of one range packed by
// PendingOutboundRecipientsScan, a JSON array of [user id, device id,
// oldest sequence] as SQLite's json_array writes them, with the entries
// each was read from fourth if counted, and returns how many entries they
// were read from (one each if not counted). A user id without an escape
// is a substring of packed (no copy).
func unpackRecipients(packed string, counted bool, out []store.PendingRecipient) ([]store.PendingRecipient, int64, error) {
	if len(packed) < 2 || packed[0] != '[' || packed[len(packed)-1] != ']' {
		return nil, 0, errMalformed("not a list")
	}
	var read int64
	p := packed[1 : len(packed)-1]
	for len(p) > 0 {
		if len(p) < 2 || p[0] != '[' || p[1] != '"' {
			return nil, 0, errMalformed("entry")
		}
		user, rest, err := jsonString(p[2:])
		if err != nil {
			return nil, 0, err
		}
		v := [3]int64{2: 1}
		fields := v[:2]
		if counted {
			fields = v[:]
		}
		for k := range fields {
			if len(rest) == 0 || rest[0] != ',' {
				return nil, 0, errMalformed("entry")
			}
			var n int
			if v[k], n, err = leadingInt(rest[1:]); err != nil {
				return nil, 0, err
			}
			rest = rest[1+n:]
		}
		switch {
		case len(rest) == 0 || rest[0] != ']':
			return nil, 0, errMalformed("entry")
		case len(rest) == 1:
			rest = ""
		case rest[1] != ',' || len(rest) == 2:
			return nil, 0, errMalformed("list separator")
		default:
			rest = rest[2:]
		}
		if v[2] < 1 || v[2] > math.MaxInt64-read {
			return nil, 0, errMalformed("entry count")
		}
		read += v[2]
		out = append(out, store.PendingRecipient{
			Recipient:      store.DeviceAddress{UserID: user, DeviceID: v[0]},
			OldestSequence: v[1],
		})
		p = rest
	}
	return out, read, nil
}

// jsonString decodes the JSON string whose opening quote is just before s
// and returns it and what follows its closing quote.
func jsonString(s string) (string, string, error) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			return s[:i], s[i+1:], nil
		case '\\':
			return jsonEscaped(s, i)
		}
	}
	return "", "", errMalformed("unterminated string")
}

// jsonEscaped is jsonString for a string with an escape at s[i].
func jsonEscaped(s string, i int) (string, string, error) {
	b := append(make([]byte, 0, len(s)), s[:i]...)
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			return string(b), s[i+1:], nil
		case c != '\\':
			b = append(b, c)
			i++
			continue
		case i+1 == len(s):
			return "", "", errMalformed("escape")
		}
		switch e := s[i+1]; e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			if i+6 > len(s) {
				return "", "", errMalformed("escape")
			}
			r, err := strconv.ParseUint(s[i+2:i+6], 16, 16)
			if err != nil || utf16.IsSurrogate(rune(r)) {
				return "", "", errMalformed("escape")
			}
			b = utf8.AppendRune(b, rune(r))
			i += 6
			continue
		default:
			return "", "", errMalformed("escape")
		}
		i += 2
	}
	return "", "", errMalformed("unterminated string")
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
