package sqlitestore

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// A row read from disk is checked before it is believed: the queries that
// feed a page, a retry or a rotation return their key and sealed columns
// as the driver read them (string for TEXT, int64 for INTEGER, []byte for
// BLOB, float64 for REAL, nil for NULL), and columns checks each one's
// storage class in Go, at no cost in SQL. A row holding a class the schema
// never stores (a recipient as a BLOB, say, which the per-recipient index,
// the counts and the retry would never find under that recipient) is
// reported with store.ErrCorruptRow and never opened.

// columns decodes a raw row's values, noting every value of another
// storage class than the schema declares.
type columns struct{ problems []string }

func (c *columns) wrong(col string, v any, want string) {
	c.problems = append(c.problems, fmt.Sprintf("%s is %s, not %s", col, storageClass(v), want))
}

// text returns a TEXT value (a BLOB's bytes, for the report).
func (c *columns) text(col string, v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		c.wrong(col, v, "TEXT")
		return string(v)
	}
	c.wrong(col, v, "TEXT")
	return ""
}

// integer returns an INTEGER value (the number a BLOB spells, for the
// report, so that a delete by the reported recipient finds the row, as
// DeletePendingOutbound matches such twins).
func (c *columns) integer(col string, v any) int64 {
	switch v := v.(type) {
	case int64:
		return v
	case []byte:
		c.wrong(col, v, "INTEGER")
		n, _ := strconv.ParseInt(string(v), 10, 64)
		return n
	}
	c.wrong(col, v, "INTEGER")
	return 0
}

// blob returns a BLOB value (a TEXT's bytes, for the report and a sealed
// value's header only).
func (c *columns) blob(col string, v any) []byte {
	switch v := v.(type) {
	case []byte:
		return v
	case string:
		c.wrong(col, v, "BLOB")
		return []byte(v)
	}
	c.wrong(col, v, "BLOB")
	return nil
}

// sealed returns a message row's sealed value, read as a query of the
// shape queries/README.md names ("A value is measured before it is
// read"): v is the value, or NULL when size, its octet_length, is over
// storeimpl.MaxSealedMessageSize, the largest record a store writes. Such
// a value was never read into memory and is reported here.
func (c *columns) sealed(v, size any) []byte {
	if n, ok := size.(int64); ok && n > storeimpl.MaxSealedMessageSize {
		c.problems = append(c.problems, fmt.Sprintf("sealed is %d bytes, over the %d of the largest record the store writes (not read)", n, storeimpl.MaxSealedMessageSize))
		return nil
	}
	return c.blob("sealed", v)
}

// address returns the device address held by a user id and a device id
// column.
func (c *columns) address(userCol string, user any, deviceCol string, device any) store.DeviceAddress {
	return store.DeviceAddress{UserID: c.text(userCol, user), DeviceID: c.integer(deviceCol, device)}
}

// message returns what a message row (pending outbound or inbound) holds
// besides its sequence: the remote device (userCol, deviceCol), the
// logical id, noting one of the wrong length, and the sealed value
// (measured first: see sealed).
func (c *columns) message(userCol string, user any, deviceCol string, device any, logicalID, sealed, sealedSize any) (store.DeviceAddress, store.LogicalMessageID, []byte) {
	addr := c.address(userCol, user, deviceCol, device)
	lid := c.blob("logical_id", logicalID)
	v := c.sealed(sealed, sealedSize)
	var id store.LogicalMessageID
	if len(lid) == store.LogicalMessageIDLen {
		copy(id[:], lid)
	} else {
		c.problems = append(c.problems, fmt.Sprintf("logical_id is %d bytes, not %d", len(lid), store.LogicalMessageIDLen))
	}
	return addr, id, v
}

// err returns nil, or an error matching store.ErrCorruptRow saying what
// is wrong.
func (c *columns) err() error {
	if len(c.problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", store.ErrCorruptRow, strings.Join(c.problems, "; "))
}

// storageClass names the storage class of a value the driver returned.
func storageClass(v any) string {
	switch v.(type) {
	case nil:
		return "NULL"
	case int64:
		return "INTEGER"
	case float64:
		return "REAL"
	case string:
		return "TEXT"
	case []byte:
		return "BLOB"
	}
	return fmt.Sprintf("%T", v)
}

// pendingRow is a pending outbound row as the page, next and rotation
// queries read it, each column raw.
type pendingRow struct {
	Sequence          int64
	RecipientUserID   any
	RecipientDeviceID any
	LogicalID         any
	Sealed            any
	// SealedSize is the sealed value's octet_length: Sealed is NULL when
	// it is over the bound (columns.sealed).
	SealedSize any
}

// openPending opens r, read for the recipient want (nil: any), or
// reports it unreadable (see check); with the seal error if its sealed
// value does not open. The recipient and id are reported as far as they
// decode.
func (s *Store) openPending(r pendingRow, want *store.DeviceAddress) (store.PendingMessage, *store.UnreadablePendingMessage) {
	return s.open(decodePending(r), want)
}

// decodedRow is a pending row as read, its columns decoded.
type decodedRow struct {
	seq    int64
	to     store.DeviceAddress
	id     store.LogicalMessageID
	sealed []byte
	// corrupt says what the row's columns hold that the schema never
	// stores ("" if nothing): such a row is reported, never opened, and
	// its sealed value is only for reading its header (which key it
	// names).
	corrupt string
}

// decodePending checks r's columns and returns them decoded, with what is
// wrong with them in corrupt: another storage class than the schema
// declares, or a logical id of the wrong length.
func decodePending(r pendingRow) decodedRow {
	var c columns
	to, id, sealed := c.message("recipient_user_id", r.RecipientUserID, "recipient_device_id", r.RecipientDeviceID, r.LogicalID, r.Sealed, r.SealedSize)
	return decodedRow{seq: r.Sequence, to: to, id: id, sealed: sealed, corrupt: strings.Join(c.problems, "; ")}
}

// check returns the unreadable entry of r if it may not be opened as a
// pending message read for want (nil: a read of every recipient's rows),
// nil if it may. Each cause matches store.ErrCorruptRow: a corrupt row; a
// row read for want that is stored for another recipient (SQL selected
// it, but only an exact byte for byte match is want's row); a row with a
// malformed recipient. A recipient equal to want is valid, as want was
// validated.
func check(r decodedRow, want *store.DeviceAddress) *store.UnreadablePendingMessage {
	var why string
	switch {
	case r.corrupt != "":
		why = r.corrupt
	case want != nil && r.to != *want:
		why = fmt.Sprintf("stored for recipient %q device %d, read for recipient %q device %d", r.to.UserID, r.to.DeviceID, want.UserID, want.DeviceID)
	case want == nil:
		if err := r.to.Validate(); err != nil {
			why = fmt.Sprintf("recipient %q: %v", r.to, err)
		}
	}
	if why == "" {
		return nil
	}
	return &store.UnreadablePendingMessage{PendingMessage: r.message(nil), Cause: fmt.Errorf("%w: %s", store.ErrCorruptRow, why)}
}

// message returns r as a pending message holding plaintext.
func (r decodedRow) message(plaintext []byte) store.PendingMessage {
	return store.PendingMessage{Sequence: r.seq, Recipient: r.to, ID: r.id, Plaintext: plaintext}
}

// open opens r, read for want (see check), or returns its unreadable
// entry: check's, or the seal error as its cause.
func (s *Store) open(r decodedRow, want *store.DeviceAddress) (store.PendingMessage, *store.UnreadablePendingMessage) {
	if bad := check(r, want); bad != nil {
		return store.PendingMessage{}, bad
	}
	pt, err := s.keys.Open(seal.RecordPendingOutbound, seal.MessageAD(r.to.UserID, r.to.DeviceID, r.id), r.sealed)
	if err != nil {
		return store.PendingMessage{}, &store.UnreadablePendingMessage{PendingMessage: r.message(nil), Cause: err}
	}
	return r.message(pt), nil
}

// page builds the page of the rows read for a page of limit, for want
// (nil: every recipient's): rows in ascending sequence order, at most
// limit + 1 of them (the last one only says that another page follows,
// and is never opened). Each returned row is opened into Messages or
// reported in Unreadable; NextAfterSequence is the last returned
// sequence if more follow.
func (s *Store) page(rows []decodedRow, limit int, want *store.DeviceAddress) store.PendingMessagePage {
	var page store.PendingMessagePage
	if len(rows) > limit {
		rows = rows[:limit]
		next := rows[len(rows)-1].seq
		page.NextAfterSequence = &next
	}
	page.Messages = make([]store.PendingMessage, 0, len(rows))
	for _, r := range rows {
		m, bad := s.open(r, want)
		if bad != nil {
			page.Unreadable = append(page.Unreadable, *bad)
			continue
		}
		page.Messages = append(page.Messages, m)
	}
	return page
}
