// Package store is the contract between the client and its storage: the
// Store interface (the pending outbound queue and the rest of the
// client's persisted state), the types its calls take and return
// (PendingMessage, PageRequest, PendingMessagePage,
// UnreadablePendingMessage, ...) and the errors every store returns. It
// also holds the identifiers every layer shares: DeviceAddress, the
// address of one device, and LogicalMessageID, the id of one message
// across its retries.
//
// The two implementations are store/sqlitestore (the client's SQLite
// database) and store/memstore (in memory, for tests and examples). A
// store never opens a network connection, never decides what a message
// means and never keeps a tombstone for a removed message.
package store

import (
	"fmt"
	"strings"
)

// MaxPageSize is the largest page of pending messages a store returns.
const MaxPageSize = 100

// MaxPlaintextSize is the largest pending message plaintext a store
// accepts: the largest body a client frame carries (the session's
// plaintext limit, 63 KiB, less the frame's 2-byte header and 16-byte
// logical id; package client does not build if the two disagree). The
// store enforces it itself so that no caller can fill the queue with
// messages that could never be sent.
const MaxPlaintextSize = 64494

// PendingMessage is one sent, not yet acknowledged message.
type PendingMessage struct {
	// Sequence is the message's place in the one global, never reused
	// pending sequence: the pagination cursor.
	Sequence  int64
	Recipient DeviceAddress
	ID        LogicalMessageID
	// Plaintext is the opened message, owned by the caller.
	Plaintext []byte
}

// UnreadablePendingMessage is a pending row the store found but could not
// open: damaged, tampered with, sealed with a key the keyring does not
// hold, or stored with values the schema never holds. It is reported,
// never opened as if it were fine, so that the application can abandon it
// (client.Client.AbandonPendingMessage with its PendingMessage) and one bad
// row never hides the others.
type UnreadablePendingMessage struct {
	// PendingMessage is the row's sequence, recipient and logical id as
	// stored, as far as they decode (a part that does not decode is left
	// zero; Cause then matches ErrCorruptRow). Its Plaintext is nil.
	PendingMessage
	// Cause says why the row is unreadable. It matches, with errors.Is,
	// exactly one of: seal.ErrWrongKey (sealed with a key the keyring
	// does not hold), seal.ErrAuthentication (altered, or moved to another
	// recipient or id), seal.ErrTruncated, seal.ErrMalformed,
	// seal.ErrUnknownVersion or seal.ErrRecordType (not a pending message
	// record this code reads), or ErrCorruptRow (a column holds the wrong
	// storage class or a value out of bounds).
	Cause error
}

// PendingMessagePage is one page of pending rows in ascending sequence order: the
// messages that opened and, in the same sequence range and counting
// toward the same limit, the rows that did not.
type PendingMessagePage struct {
	Messages []PendingMessage
	// Unreadable lists the rows of the page that could not be opened,
	// ascending by sequence; nil if there are none.
	Unreadable []UnreadablePendingMessage
	// NextAfterSequence is the sequence to pass as the cursor for the following page
	// (the last sequence of this page, readable or not), or nil if this
	// is the last page.
	NextAfterSequence *int64
}

// PageRequest selects a page of pending messages.
type PageRequest struct {
	// After is the cursor: only messages with a greater sequence are
	// returned. Nil starts before every stored sequence (also one at or
	// below zero, which the store never hands out but a damaged database
	// may hold: no row is left out of a walk from the start). A negative
	// cursor is invalid unless such a sequence is stored (it is then the
	// NextAfterSequence of a page that ended on it).
	After *int64
	// Limit is the page size, 1..MaxPageSize.
	Limit int
	// Recipient, if set, keeps only messages to that device. The cursor is
	// the same global sequence, so a filtered walk can start anywhere.
	Recipient *DeviceAddress
}

// Validate returns an error wrapping ErrInvalidArgument if Limit is
// outside 1..MaxPageSize or Recipient is malformed. A negative After is
// checked by the store against what it holds (see After).
func (r PageRequest) Validate() error {
	return validatePage(r.Limit, "recipient", r.Recipient)
}

// UnreadableError reports pending rows that were skipped because they
// could not be opened. errors.Is matches ErrUnreadable and each entry's
// cause; errors.As gives the entries.
type UnreadableError struct {
	// Entries are the skipped rows, ascending by sequence.
	Entries []UnreadablePendingMessage
}

// Error lists the skipped rows.
func (e *UnreadableError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: %d skipped", ErrUnreadable, len(e.Entries))
	for _, u := range e.Entries {
		fmt.Fprintf(&b, "; sequence %d (%s, %s): %v", u.Sequence, u.Recipient, u.ID, u.Cause)
	}
	return b.String()
}

// Unwrap returns ErrUnreadable and every entry's cause.
func (e *UnreadableError) Unwrap() []error {
	out := make([]error, 0, len(e.Entries)+1)
	out = append(out, ErrUnreadable)
	for _, u := range e.Entries {
		out = append(out, u.Cause)
	}
	return out
}

// PeerPart names one part of a remote device's stored state.
type PeerPart int

// The parts of a remote device's stored state.
const (
	PeerSession PeerPart = iota + 1
	PeerInitiation
	PeerPin
)

// String returns the part's name as errors print it.
func (p PeerPart) String() string {
	switch p {
	case PeerSession:
		return "session"
	case PeerInitiation:
		return "initiation"
	case PeerPin:
		return "identity pin"
	}
	return fmt.Sprintf("PeerPart(%d)", int(p))
}

// PeerDamage says which parts of a remote device's stored state do not
// open, or (as a client reports them) open but do not
// decode. Each field is that part's cause, matching with errors.Is
// exactly one of seal.ErrWrongKey (sealed with a key the keyring does not
// hold), seal.ErrAuthentication (altered, or moved from another row),
// seal.ErrTruncated, seal.ErrMalformed, seal.ErrUnknownVersion or
// seal.ErrRecordType (not a record of that part's type), or else the
// client's decoding error, or nil if the part is usable or absent.
type PeerDamage struct {
	Session    error
	Initiation error
	Pin        error
}

// Damaged reports whether any part is damaged.
func (d PeerDamage) Damaged() bool {
	return d.Session != nil || d.Initiation != nil || d.Pin != nil
}

// causes returns the damaged parts' names and causes, in the order
// session, initiation, pin.
func (d PeerDamage) causes() ([]string, []error) {
	var names []string
	var errs []error
	for _, p := range []struct {
		name  string
		cause error
	}{{PeerSession.String(), d.Session}, {PeerInitiation.String(), d.Initiation}, {PeerPin.String(), d.Pin}} {
		if p.cause != nil {
			names = append(names, p.name)
			errs = append(errs, p.cause)
		}
	}
	return names, errs
}

// PeerUnreadableError reports that parts of Peer's stored state do not
// open or do not decode (see PeerDamage). errors.Is matches
// ErrPeerUnreadable and each damaged part's cause; errors.As gives Peer
// and Damage.
type PeerUnreadableError struct {
	Peer   DeviceAddress
	Damage PeerDamage
}

// Error names the peer and each damaged part with its cause.
func (e *PeerUnreadableError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v of %s", ErrPeerUnreadable, e.Peer)
	names, errs := e.Damage.causes()
	for i, n := range names {
		fmt.Fprintf(&b, "; %s: %v", n, errs[i])
	}
	return b.String()
}

// Unwrap returns ErrPeerUnreadable and every damaged part's cause.
func (e *PeerUnreadableError) Unwrap() []error {
	_, errs := e.Damage.causes()
	return append([]error{ErrPeerUnreadable}, errs...)
}
