// Package storage is the contract between the client and its stores:
// the pending outbound queue (insert, keyset pages, counts, abandon,
// next-after-cursor) and the rest of the client's persisted state
// (identity, identity pins, sessions, session initiations, processed
// inbound ids), with the helpers both stores share (argument checks, the
// associated data binding each sealed value to its row).
//
// Two implementations satisfy it: internal/sqlitestore (SQLite through the
// sqlc-generated queries) and internal/memstore (in memory). The public
// packages store/sqlitestore and store/memstore hand an application a
// handle whose dynamic type is one of them; client.Open takes the contract
// from it. internal/storetest holds the contract test suite both pass.
//
// A store never opens a network connection, never decides what a message
// means and never keeps a tombstone for a removed message.
package storage

import (
	"bytes"
	"context"
	"fmt"
	"math"

	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// CheckCursor returns an error wrapping ErrInvalidArgument if after is
// negative while the store holds no row with a negative sequence
// (negativeStored false). The store hands out positive sequences only, so
// a negative cursor can only be the NextAfterSequence of a page that ended
// on a damaged row's sequence; anything else is a caller's mistake.
func CheckCursor(after int64, negativeStored bool) error {
	if after < 0 && !negativeStored {
		return fmt.Errorf("%w: negative cursor %d", store.ErrInvalidArgument, after)
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

// ValidateAddress returns an error wrapping both ErrInvalidArgument and
// ids.ErrInvalid if a is malformed.
func ValidateAddress(a ids.DeviceAddress) error {
	if err := a.Validate(); err != nil {
		return fmt.Errorf("%w: %w", store.ErrInvalidArgument, err)
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
	PendingMessages(ctx context.Context, req store.PageRequest) (store.PendingMessagePage, error)
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
	// AbandonPendingMessage removes, without opening it, the pending row
	// m was read from, and reports whether one was there: the row at
	// m.Sequence if its recipient and logical id, decoded as a page
	// reports them, are m.Recipient and m.ID (a damaged row too, also one
	// whose recipient or id do not decode: sequences are never reused, so
	// the sequence names that row only); otherwise, if m.Recipient is well
	// formed, the pending message (m.Recipient, m.ID) as AbandonPending
	// removes it.
	AbandonPendingMessage(ctx context.Context, m store.PendingMessage) (bool, error)
	// NextPendingMessage returns the first pending message for recipient with a
	// sequence greater than *after (any sequence if after is nil), or
	// ErrNotFound. If that row cannot be opened it returns an
	// *UnreadableError holding it, so that the caller can step past its
	// sequence. Returns ErrInvalidArgument for a malformed recipient or a
	// negative cursor (see CheckCursor).
	NextPendingMessage(ctx context.Context, recipient ids.DeviceAddress, after *int64) (store.PendingMessage, error)
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

	// ReadPeerParts returns each part of peer's stored state (session,
	// unanswered initiation, identity pin) as stored, and opened or with
	// the error it does not open with (see PeerReading). Absent parts are
	// nil everywhere. Returns ErrInvalidArgument for a malformed peer.
	ReadPeerParts(ctx context.Context, peer ids.DeviceAddress) (PeerReading, error)
	// DiscardPeerParts removes, in one transaction, each part of peer's
	// state that damage names (a non-nil cause), but only if each of them
	// still holds the sealed value read.Sealed has for it: otherwise it
	// removes nothing and returns an error matching store.ErrPeerChanged. It
	// returns what it removed, each part with its cause from damage; if
	// damage names no part it returns the zero PeerDamage and changes
	// nothing. If it removes the pin and pin is not nil, pin is stored
	// (sealed) in its place in the same transaction. Pending messages and
	// every other row are left as they are. Returns ErrInvalidArgument for
	// a malformed peer.
	DiscardPeerParts(ctx context.Context, peer ids.DeviceAddress, pin []byte, read PeerReading, damage store.PeerDamage) (store.PeerDamage, error)

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

// PeerPart is one part of a remote device's stored state: its name, the
// record type it is sealed as, its field in a PeerState and its cause in
// a store.PeerDamage. PeerParts is the one table of them.
type PeerPart struct {
	Part   store.PeerPart
	Record seal.RecordType
	State  func(*PeerState) *[]byte
	Damage func(*store.PeerDamage) *error
}

// PeerParts lists the parts of a remote device's stored state, in the
// order session, initiation, pin; every walk over the parts reads it.
var PeerParts = [...]PeerPart{
	{store.PeerSession, seal.RecordSession, func(s *PeerState) *[]byte { return &s.Session }, func(d *store.PeerDamage) *error { return &d.Session }},
	{store.PeerInitiation, seal.RecordSessionInitiation, func(s *PeerState) *[]byte { return &s.Initiation }, func(d *store.PeerDamage) *error { return &d.Initiation }},
	{store.PeerPin, seal.RecordIdentityPin, func(s *PeerState) *[]byte { return &s.Pin }, func(d *store.PeerDamage) *error { return &d.Pin }},
}

// PartOf returns the table entry of p, false for a value that names no
// part.
func PartOf(p store.PeerPart) (PeerPart, bool) {
	for _, e := range PeerParts {
		if e.Part == p {
			return e, true
		}
	}
	return PeerPart{}, false
}

// PeerReading is what ReadPeerParts read of a remote device's state.
type PeerReading struct {
	// Sealed is each part as stored; DiscardPeerParts compares with it.
	Sealed PeerState
	// Opened is the plaintext of each part that opens.
	Opened PeerState
	// Unopened is, for each part that does not open with any key the
	// keyring holds, the seal error.
	Unopened store.PeerDamage
}

// Unchanged reports whether current, the sealed state stored now, holds
// for each part damage names the same sealed value as r.Sealed.
func (r PeerReading) Unchanged(current PeerState, damage store.PeerDamage) bool {
	for _, p := range PeerParts {
		if *p.Damage(&damage) != nil && !bytes.Equal(*p.State(&current), *p.State(&r.Sealed)) {
			return false
		}
	}
	return true
}

// PeerCheck tells DiscardUnreadablePeer whether the opened value of one
// part of a remote device's state is usable: nil if it is, the reason if
// it is not (the part is then removed, with that reason as its cause).
// The store knows nothing of the values' encodings; the client, which
// decodes them, decides. It runs outside any transaction.
type PeerCheck func(part store.PeerPart, plaintext []byte) error

// DiscardUnreadablePeer removes each part of peer's stored state held by
// st whose sealed value does not open or, if check is not nil, whose
// opened value check refuses; never a part that opens and check accepts.
// It reads the parts (ReadPeerParts), calls check on each opened one
// outside any transaction, then removes the damaged ones
// (DiscardPeerParts, pin replacing a removed pin), which fails with
// store.ErrPeerChanged if any of them changed in between. It returns what it
// removed, each part with its cause (the seal error, or check's error).
func DiscardUnreadablePeer(ctx context.Context, st State, peer ids.DeviceAddress, pin []byte, check PeerCheck) (store.PeerDamage, error) {
	read, err := st.ReadPeerParts(ctx, peer)
	if err != nil {
		return store.PeerDamage{}, err
	}
	damage := read.Unopened
	for _, p := range PeerParts {
		value, cause := *p.State(&read.Opened), p.Damage(&damage)
		if check == nil || value == nil || *cause != nil {
			continue
		}
		*cause = check(p.Part, value)
	}
	return st.DiscardPeerParts(ctx, peer, pin, read, damage)
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
		return fmt.Errorf("%w: no peer", store.ErrInvalidArgument)
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
			return fmt.Errorf("%w: %s listed twice", store.ErrInvalidArgument, p.Peer)
		}
		seen[p.Peer] = struct{}{}
	}
	return nil
}

// ValidateUpdate returns an error wrapping ErrInvalidArgument if u, used
// as a SavePeer update, would delete the identity pin.
func (u PeerState) ValidateUpdate() error {
	if u.Pin != nil && len(u.Pin) == 0 {
		return fmt.Errorf("%w: an identity pin cannot be deleted", store.ErrInvalidArgument)
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

// RecipientLister lists the recipients that have pending messages.
type RecipientLister interface {
	// PendingRecipients returns the page selected by req, in one storage
	// transaction: each recipient with at least one pending message
	// (readable or not), once, in address order, without opening any
	// message. Pages walked with their cursors skip and repeat no
	// recipient that stays pending throughout; a recipient whose last
	// message goes between pages is simply absent, one that gets its first
	// after the walk passed its address appears in a later walk. A row
	// whose recipient columns hold another storage class than the schema
	// declares names no address and is not listed (pages report it as
	// unreadable). Returns store.ErrInvalidArgument if req does not validate.
	PendingRecipients(ctx context.Context, req store.RecipientPageRequest) (store.PendingRecipientPage, error)
}
