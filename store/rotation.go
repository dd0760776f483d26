package store

import (
	"fmt"
	"strings"

	"github.com/securemsg/storage/seal"
)

// RotationProgress reports how far a storage key rotation has gone, over
// the whole rotation: every table, both walks (the one that re-seals and
// the one that confirms). RotateKey sends one after every committed batch
// that walked rows, and a last one when it has finished unless that
// batch's was already at Done == Total.
//
// Done/Total is a progress bar's fraction: Done never decreases, the
// fraction never goes back, and the last report of a rotation that
// finishes (with or without skipped rows) has Done == Total, the only one
// that does unless the walk ran past its count. Rows written or deleted
// during the rotation make the walk longer or shorter than counted: Total
// is then raised to Done while the walk runs past it (the bar waits at its
// end) and set to Done in the last report.
type RotationProgress struct {
	// Done is the number of row visits so far: each walk visits every
	// row of every table once (re-sealed, found already under the new
	// key, or skipped).
	Done int64
	// Total is the number of visits the rotation expects: twice (one
	// re-sealing walk, one confirming walk) the rows of every table
	// counted when it started, adjusted as described above.
	Total int64
	// Resealed is the number of rows re-sealed so far; Done - Resealed -
	// Skipped visits found a row already under the new key.
	Resealed int64
	// Skipped is the number of visits so far that found a row the
	// rotation could not open and left as it was (see SkippedRow). Each
	// walk visits such a row again, so each counts it again; RotationError
	// lists the rows themselves.
	Skipped int64
	// Table is the table of the batch just committed.
	Table string
	// Pass counts the walks over every table, from 1. The walk is repeated
	// until a pass re-seals nothing, so the last pass only confirms (and a
	// third pass, which only happens if something wrote under an old key
	// behind the walk, runs past Total).
	Pass int
}

// SkippedRow is a row a key rotation could not open, or whose columns hold
// values the schema never stores, and therefore left byte for byte as it
// was: it is neither re-sealed nor deleted.
type SkippedRow struct {
	// Table is the row's table, one of those RotateKey walks but
	// storage_key (a verifier that does not open is not reported: it is
	// left as it is and goes with its key, deleted when the key is
	// dropped).
	Table string
	// Address is the row's device: the peer of an identity_pin, session or
	// session_initiation row, the recipient of a pending_outbound_message
	// row, the sender of a pending_inbound_message row, this device for
	// local_identity. As stored, as far as it decodes.
	Address DeviceAddress
	// Sequence and ID identify a pending_outbound_message or
	// pending_inbound_message row (ID zero if it does not decode).
	Sequence int64
	ID       LogicalMessageID
	// SealedWith is the key id the sealed value's header names, if
	// HasHeader (the header parses).
	SealedWith seal.KeyID
	HasHeader  bool
	// Authentic is set for a row skipped with ErrCorruptRow whose
	// sealed value authenticates under the key its header names as the
	// row its columns spell (checked, never returned): only such a row
	// keeps that key (RotationError.Kept).
	Authentic bool
	// Cause says why the row was skipped. It matches, with errors.Is, a
	// seal error (seal.ErrWrongKey: sealed with a key the keyring does not
	// hold; seal.ErrAuthentication: altered or moved; seal.ErrTruncated,
	// seal.ErrMalformed, seal.ErrUnknownVersion, seal.ErrRecordType) or
	// ErrCorruptRow (a column of the wrong storage class, or a
	// pending row's logical id of the wrong length).
	Cause error
}

// Pending returns a skipped pending_outbound_message row as the unreadable
// entry a page reports, for the client's abandon; false for rows of other
// tables.
func (r SkippedRow) Pending() (UnreadablePendingMessage, bool) {
	if r.Table != "pending_outbound_message" {
		return UnreadablePendingMessage{}, false
	}
	return UnreadablePendingMessage{PendingMessage: PendingMessage{Sequence: r.Sequence, Recipient: r.Address, ID: r.ID}, Cause: r.Cause}, true
}

// String names the row: its table and identity.
func (r SkippedRow) String() string {
	switch r.Table {
	case "pending_outbound_message", "pending_inbound_message":
		return fmt.Sprintf("%s sequence %d (%s, %s)", r.Table, r.Sequence, r.Address, r.ID)
	case "storage_key":
		return "storage_key verifier"
	}
	return fmt.Sprintf("%s %s", r.Table, r.Address)
}

// RotationError is the error of a key rotation that finished but skipped
// rows: every other row is under the new key, which is the active one.
// errors.Is matches ErrRowsSkipped and each skipped row's cause; errors.As
// gives the rows.
type RotationError struct {
	// Skipped are the rows left as they were, in walk order: table by
	// table in RotateKey's order, in key order within a table.
	Skipped []SkippedRow
	// Kept are the old keys the rotation did not drop, ascending: the keys
	// of the skipped rows whose cause is ErrCorruptRow and whose
	// sealed value authenticates under the key its header names
	// (SkippedRow.Authentic). Such a row is not re-sealed (its columns are
	// not believed), but its value is intact and opens once the row is
	// repaired; dropping its key would make it unreadable for good. A
	// header alone, which anyone can write, keeps no key. A
	// kept key stays recorded as retiring and held by the keyring until
	// the rows naming it are removed (or repaired) and RotateKey runs
	// again.
	Kept []seal.KeyID
}

// rotationErrorRows is how many skipped rows RotationError.Error names;
// Skipped holds them all.
const rotationErrorRows = 10

// Error names the kept keys and the first skipped rows (all are in
// Skipped), so that a database with many damaged rows gives a message of
// bounded length.
func (e *RotationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: %d skipped", ErrRowsSkipped, len(e.Skipped))
	if len(e.Kept) > 0 {
		fmt.Fprintf(&b, ", old keys %v kept", e.Kept)
	}
	for _, r := range e.Skipped[:min(len(e.Skipped), rotationErrorRows)] {
		fmt.Fprintf(&b, "; %s: %v", r, r.Cause)
	}
	if n := len(e.Skipped) - rotationErrorRows; n > 0 {
		fmt.Fprintf(&b, "; and %d more", n)
	}
	return b.String()
}

// Unwrap returns ErrRowsSkipped and every skipped row's cause.
func (e *RotationError) Unwrap() []error {
	out := make([]error, 0, len(e.Skipped)+1)
	out = append(out, ErrRowsSkipped)
	for _, r := range e.Skipped {
		out = append(out, r.Cause)
	}
	return out
}
