// Package store defines the client's local storage contract: the pending
// outbound queue (insert, keyset pages, counts, delete, next-after-cursor)
// and the rest of the client's persisted state (identity, identity pins,
// sessions, session initiations, processed inbound ids).
//
// Two implementations satisfy it: package sqlitestore (the real one,
// SQLite through the sqlc-generated queries) and package memstore (in
// memory, for tests and examples). Package storetest holds the contract
// test suite that both pass.
//
// Package store never opens a network connection, never decides what a
// message means and never keeps a tombstone for a removed message.
package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/session"
)

// MaxPageSize is the largest page of pending messages a store returns.
const MaxPageSize = 100

// MaxPlaintextSize is the largest pending message plaintext a store
// accepts: the largest body a client frame carries (the session's
// plaintext limit less the frame's 2-byte header and 16-byte logical id).
// The store enforces it itself so that no caller can fill the queue with
// messages that could never be sent.
const MaxPlaintextSize = session.MaxPlaintextSize - (2 + ids.LogicalMessageIDLen)

// Errors shared by every implementation, checked with errors.Is.
var (
	// ErrInvalidArgument means a call was given a malformed argument (a
	// page limit outside 1..MaxPageSize, a negative cursor, a malformed
	// address or id). Nothing was changed.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNotFound means the record asked for does not exist.
	ErrNotFound = errors.New("not found")
	// ErrDuplicate means a pending message with the same recipient and
	// logical id already exists.
	ErrDuplicate = errors.New("duplicate pending message")
	// ErrClosed means the store was closed.
	ErrClosed = errors.New("store closed")
	// ErrInUse means the store, or its database file, already serves
	// another user: a second client on one store (Claim), or a second
	// open of a database file that an open store holds (sqlitestore.Open).
	// Nothing was changed. Two users of one state would each cache the
	// sessions and encrypt under the same message keys.
	ErrInUse = errors.New("store in use")
	// ErrUnreadable means pending rows could not be opened; it is matched
	// by an *UnreadableError, which lists them.
	ErrUnreadable = errors.New("unreadable pending message")
	// ErrCorruptRow means a pending row's columns hold values the schema
	// never stores: the wrong storage class (a recipient stored as a BLOB,
	// say, which would escape the per-recipient index) or a value out of
	// bounds (a malformed recipient, a logical id of the wrong length). It
	// is the cause of an UnreadablePendingMessage.
	ErrCorruptRow = errors.New("corrupt pending row")
	// ErrPeerUnreadable means part of a remote device's stored state (its
	// session, unanswered initiation or identity pin) could not be opened,
	// or (as the client reports it) opened but could not be decoded. It is
	// matched by a *PeerUnreadableError, which says which parts and why;
	// DiscardUnreadablePeer removes exactly those parts.
	ErrPeerUnreadable = errors.New("unreadable peer state")
)

// PendingMessage is one sent, not yet acknowledged message.
type PendingMessage struct {
	// Sequence is the message's place in the one global, never reused
	// pending sequence: the pagination cursor.
	Sequence  int64
	Recipient ids.DeviceAddress
	ID        ids.LogicalMessageID
	// Plaintext is the opened message, owned by the caller.
	Plaintext []byte
}

// UnreadablePendingMessage is a pending row the store found but could not open:
// damaged, tampered with, sealed with a key the keyring does not hold, or
// stored with values the schema never holds. It is reported, never
// opened as if it were fine, so that the application can abandon it
// (AbandonPending with its Recipient and ID) and one bad row never hides
// the others.
type UnreadablePendingMessage struct {
	// Sequence is the row's sequence, as stored.
	Sequence int64
	// Recipient and ID are the row's recipient and logical id as stored,
	// as far as they decode (a part that does not decode is left zero;
	// Cause then matches ErrCorruptRow).
	Recipient ids.DeviceAddress
	ID        ids.LogicalMessageID
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
	Recipient *ids.DeviceAddress
}

// Validate returns an error wrapping ErrInvalidArgument if Limit is
// outside 1..MaxPageSize or Recipient is malformed. A negative After is
// checked by the store against what it holds (see CheckCursor).
func (r PageRequest) Validate() error {
	if r.Limit < 1 || r.Limit > MaxPageSize {
		return fmt.Errorf("%w: page limit %d outside 1..%d", ErrInvalidArgument, r.Limit, MaxPageSize)
	}
	if r.Recipient != nil {
		return ValidateAddress(*r.Recipient)
	}
	return nil
}

// CheckCursor returns an error wrapping ErrInvalidArgument if after is
// negative while the store holds no row with a negative sequence
// (negativeStored false). The store hands out positive sequences only, so
// a negative cursor can only be the NextAfterSequence of a page that ended
// on a damaged row's sequence; anything else is a caller's mistake.
func CheckCursor(after int64, negativeStored bool) error {
	if after < 0 && !negativeStored {
		return fmt.Errorf("%w: negative cursor %d", ErrInvalidArgument, after)
	}
	return nil
}

// FirstSequence returns the smallest sequence a walk that resumes after
// the cursor after includes (nil: from the start), and false if no
// sequence can follow after.
func FirstSequence(after *int64) (int64, bool) {
	switch {
	case after == nil:
		return math.MinInt64, true
	case *after == math.MaxInt64:
		return 0, false
	}
	return *after + 1, true
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

// ValidateAddress returns an error wrapping both ErrInvalidArgument and
// ids.ErrInvalid if a is malformed.
func ValidateAddress(a ids.DeviceAddress) error {
	if err := a.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return nil
}

// Pending is the pending outbound queue.
//
// Every method runs in its own storage transaction. Only the records a
// method returns are opened: counts, deletes and the limit+1 probe row of a
// page open nothing.
type Pending interface {
	// InsertPending seals plaintext and stores it as pending for
	// recipient under id, returning its new sequence, which is greater
	// than every sequence handed out before (also deleted ones). Returns
	// ErrInvalidArgument for a malformed recipient or a plaintext longer
	// than MaxPlaintextSize, ErrDuplicate if (recipient, id) is already
	// pending.
	InsertPending(ctx context.Context, recipient ids.DeviceAddress, id ids.LogicalMessageID, plaintext []byte) (int64, error)
	// PendingMessages returns the page selected by req: the rows that open as
	// Messages, the rows that do not as Unreadable (never an error for
	// them), and a cursor past both. Returns ErrInvalidArgument if req
	// does not validate or its cursor is negative (see CheckCursor).
	PendingMessages(ctx context.Context, req PageRequest) (PendingMessagePage, error)
	// PendingMessageCount counts pending messages, all or for one recipient,
	// without opening any. Returns ErrInvalidArgument for a malformed
	// recipient.
	PendingMessageCount(ctx context.Context, recipient *ids.DeviceAddress) (int64, error)
	// AbandonPending removes the pending message (recipient, id) without
	// opening it and reports whether one was there. It also removes a
	// row naming (recipient, id) with a user id or logical id of the wrong
	// storage class (see ErrCorruptRow), so that every unreadable entry a
	// page reports with a decoded Recipient and ID can be abandoned.
	// Returns ErrInvalidArgument for a malformed recipient.
	AbandonPending(ctx context.Context, recipient ids.DeviceAddress, id ids.LogicalMessageID) (bool, error)
	// AbandonPendingSequence removes the pending row at seq without opening
	// it, whatever it holds, and reports whether one was there: the way to
	// remove an unreadable row whose recipient or id do not decode.
	// Sequences are never reused, so seq names that row only.
	AbandonPendingSequence(ctx context.Context, seq int64) (bool, error)
	// NextPendingMessage returns the first pending message for recipient with a
	// sequence greater than *after (any sequence if after is nil), or
	// ErrNotFound. If that row cannot be opened it returns an
	// *UnreadableError holding it, so that the caller can step past its
	// sequence. Returns ErrInvalidArgument for a malformed recipient or a
	// negative cursor (see CheckCursor).
	NextPendingMessage(ctx context.Context, recipient ids.DeviceAddress, after *int64) (PendingMessage, error)
	// RecipientLister lists the recipients with pending messages.
	RecipientLister
}

// LocalIdentity is this device's address and its serialized private
// identity and prekeys (opaque to the store, sealed at rest).
type LocalIdentity struct {
	Address ids.DeviceAddress
	Secret  []byte
}

// State is the rest of the client's persisted state. Values are opaque
// bytes to the store, sealed at rest and bound to their row.
type State interface {
	// LocalIdentity returns this device's identity, or ErrNotFound before
	// SaveLocalIdentity.
	LocalIdentity(ctx context.Context) (LocalIdentity, error)
	// SaveLocalIdentity stores this device's identity for the first time,
	// or replaces its secret if the address is the same. Returns
	// ErrInvalidArgument for a malformed address or a different address
	// than the one already stored.
	SaveLocalIdentity(ctx context.Context, id LocalIdentity) error

	// Peer returns the session, unanswered initiation and identity pin
	// held for peer; absent ones are nil. If any part does not open it
	// returns no state and a *PeerUnreadableError (matching
	// ErrPeerUnreadable and each cause) naming every part that does not
	// (see DiscardUnreadablePeer). Returns ErrInvalidArgument for a
	// malformed peer.
	Peer(ctx context.Context, peer ids.DeviceAddress) (PeerState, error)
	// SavePeer writes the given parts of peer's state in one transaction:
	// a nil field is left unchanged, a non-nil empty one is deleted (the
	// pin cannot be deleted).
	SavePeer(ctx context.Context, peer ids.DeviceAddress, update PeerState) error

	// DiscardUnreadablePeer removes, in one transaction, each part of
	// peer's stored state (session, unanswered initiation, identity pin)
	// whose sealed value does not open with any key the keyring holds or,
	// if check is not nil, whose opened value check refuses; never a part
	// that opens and check accepts. check is called inside the
	// transaction, once for each stored part that opens, with that
	// part's plaintext (see PeerCheck). It returns what it removed, each
	// part with its cause (the seal error, or check's error); if nothing
	// is removed it returns the zero PeerDamage and changes nothing. If it
	// removes the pin and pin is not nil, pin is stored (sealed) in its
	// place in the same transaction. Pending messages and every other row
	// are left as they are. Returns ErrInvalidArgument for a malformed
	// peer.
	DiscardUnreadablePeer(ctx context.Context, peer ids.DeviceAddress, pin []byte, check PeerCheck) (PeerDamage, error)

	// CommitSend stores a new pending message (as InsertPending) and
	// peer's advanced state (as SavePeer) in one transaction, and returns
	// the message's sequence: the message is pending exactly when the
	// session that encrypted it is stored. Returns ErrInvalidArgument for a
	// malformed peer or a plaintext longer than MaxPlaintextSize,
	// ErrDuplicate if (peer, id) is already pending.
	CommitSend(ctx context.Context, peer ids.DeviceAddress, id ids.LogicalMessageID, plaintext []byte, update PeerState) (int64, error)
	// CommitSendMany is CommitSend for one logical message to several
	// devices: in one transaction it stores a pending message (id,
	// plaintext) for each peer and saves each peer's update, and returns
	// the sequences in the order of peers. Either all of it commits or
	// nothing does. Returns ErrInvalidArgument for an empty list, a peer
	// listed twice, a malformed peer or an update deleting a pin;
	// ErrDuplicate if (peer, id) is already pending for any of them.
	CommitSendMany(ctx context.Context, id ids.LogicalMessageID, plaintext []byte, peers []PeerUpdate) ([]int64, error)

	// CommitReceived applies in (peer's advanced state, and the local
	// identity if a one-time prekey was used) and records id as processed,
	// in one transaction. It reports false if id had been processed before
	// (a duplicate, not to be given to the application again); in is
	// applied either way. Returns ErrInvalidArgument as SavePeer and
	// SaveLocalIdentity do.
	CommitReceived(ctx context.Context, peer ids.DeviceAddress, id ids.LogicalMessageID, in Inbound) (bool, error)
	// CommitAck applies in and deletes the pending message (peer, id), in
	// one transaction, reporting whether one was there (the ACK's
	// cleared). Returns ErrInvalidArgument as CommitReceived does.
	CommitAck(ctx context.Context, peer ids.DeviceAddress, id ids.LogicalMessageID, in Inbound) (bool, error)
}

// Inbound is what receiving one envelope changes besides the message's own
// bookkeeping, committed in the same transaction as it.
type Inbound struct {
	// Update is the peer's new state, as for SavePeer: at least its
	// advanced session.
	Update PeerState
	// Local, if not nil, replaces the local identity's secret (as
	// SaveLocalIdentity): answering an initiation used up a one-time
	// prekey, which must be gone exactly when the session exists.
	Local *LocalIdentity
}

// Validate returns an error wrapping ErrInvalidArgument if in's update
// would delete the pin or its local identity has a malformed address.
func (in Inbound) Validate() error {
	if err := in.Update.ValidateUpdate(); err != nil {
		return err
	}
	if in.Local != nil {
		return ValidateAddress(in.Local.Address)
	}
	return nil
}

// PeerState is what the client keeps about one remote device. In reads,
// nil means absent. In SavePeer, nil means unchanged and an empty non-nil
// slice means delete.
type PeerState struct {
	Session    []byte
	Initiation []byte
	Pin        []byte
}

// PeerPart names one part of a remote device's stored state.
type PeerPart int

// The parts of a remote device's stored state, as a PeerCheck is told.
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

// PeerCheck tells DiscardUnreadablePeer whether the opened value of one
// part of a remote device's state is usable: nil if it is, the reason if
// it is not (the part is then removed, with that reason as its cause).
// The store knows nothing of the values' encodings; the client, which
// decodes them, decides. It runs inside the store's transaction, so it
// must only look at plaintext (which it must not keep): never call the
// store.
type PeerCheck func(part PeerPart, plaintext []byte) error

// PeerDamage says which parts of a remote device's stored state do not
// open, or (as a client reports them, see PeerCheck) open but do not
// decode. Each field is that part's cause, matching with errors.Is
// exactly one of seal.ErrWrongKey (sealed with a key the keyring does not
// hold), seal.ErrAuthentication (altered, or moved from another row),
// seal.ErrTruncated, seal.ErrMalformed, seal.ErrUnknownVersion or
// seal.ErrRecordType (not a record of that part's type), or else the
// decoding error (a PeerCheck's), or nil if the part is usable or absent.
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
	Peer   ids.DeviceAddress
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

// PeerUpdate is one device of a CommitSendMany: its address and the
// update of its state (as SavePeer) that commits with its pending message.
type PeerUpdate struct {
	Peer   ids.DeviceAddress
	Update PeerState
}

// ValidatePeerUpdates returns an error wrapping ErrInvalidArgument if
// peers is empty, lists a device twice, or holds a malformed address or
// an update deleting a pin.
func ValidatePeerUpdates(peers []PeerUpdate) error {
	if len(peers) == 0 {
		return fmt.Errorf("%w: no peer", ErrInvalidArgument)
	}
	seen := make(map[ids.DeviceAddress]struct{}, len(peers))
	for _, p := range peers {
		if err := ValidateAddress(p.Peer); err != nil {
			return err
		}
		if err := p.Update.ValidateUpdate(); err != nil {
			return fmt.Errorf("%s: %w", p.Peer, err)
		}
		if _, dup := seen[p.Peer]; dup {
			return fmt.Errorf("%w: %s listed twice", ErrInvalidArgument, p.Peer)
		}
		seen[p.Peer] = struct{}{}
	}
	return nil
}

// ValidateUpdate returns an error wrapping ErrInvalidArgument if u, used
// as a SavePeer update, would delete the identity pin.
func (u PeerState) ValidateUpdate() error {
	if u.Pin != nil && len(u.Pin) == 0 {
		return fmt.Errorf("%w: an identity pin cannot be deleted", ErrInvalidArgument)
	}
	return nil
}

// Store is everything the client persists.
type Store interface {
	Pending
	State
	// Claim reserves the store for one client (package client claims the
	// store it runs on): until release is called or the store is closed,
	// another Claim fails with ErrInUse, so that two clients never hold
	// the same sessions. release may be called more than once. Returns
	// ErrClosed after Close.
	Claim() (release func(), err error)
	// Close releases the store. Calls after Close return ErrClosed.
	Close() error
}

// AddressAD is the associated data binding a sealed value to the row of
// one remote device (identity pin, session, session initiation) or to the
// local identity.
func AddressAD(a ids.DeviceAddress) []byte {
	return seal.AD([]byte(a.UserID), binary.BigEndian.AppendUint64(nil, uint64(a.DeviceID)))
}

// MessageAD is the associated data binding a sealed message to its row:
// the remote device (recipient or sender) and the logical id.
func MessageAD(a ids.DeviceAddress, id ids.LogicalMessageID) []byte {
	return seal.AD([]byte(a.UserID), binary.BigEndian.AppendUint64(nil, uint64(a.DeviceID)), id[:])
}

// KeyVerifierText is the known value a storage key's verifier seals
// (record type seal.RecordKeyVerifier, associated data KeyVerifierAD):
// opening it proves a keyring holds the key before anything else is opened
// with it. A verifier may seal more after this prefix (KeyVerifierSealedQueue;
// package legacy carries its migration's proof there); opening it is the
// proof of the key. A verifier sealing exactly KeyVerifierText is one
// written before the pending queue was sealed (a legacy database), or by a
// build that did not mark it yet.
const KeyVerifierText = "securemsg storage key verifier"

// KeyVerifierSealedQueue is the text every verifier this library records
// seals: KeyVerifierText marked "this database's pending queue is sealed
// by this library". Only a holder of the storage key can write it, so a
// marked verifier proves to package legacy that a plaintext pending table
// found beside it was not written by this library's client and must be
// refused.
const KeyVerifierSealedQueue = KeyVerifierText + "\x00pending queue sealed"

// KeyVerifierAD is the associated data binding a storage key's verifier to
// its storage_key row (the key id).
func KeyVerifierAD(id seal.KeyID) []byte {
	return seal.AD([]byte("storage_key"), []byte(fmt.Sprint(id)))
}
