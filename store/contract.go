package store

import (
	"context"

	"github.com/securemsg/storage/internal/storemark"
)

// Store is a client's local storage: the pending outbound queue
// (Pending), the pending inbound queue (InboundQueue) and the rest of the
// state the client persists (State). It is
// opened by sqlitestore.Open or memstore.New and handed to client.Open,
// which claims it and runs on it alone; an application calls Close (after
// the client) and, on a SQLite store, RotateKey, and leaves the other
// methods to the client. Only this module's two stores implement it: the
// client's atomicity and sealing guarantees are proven on them.
type Store interface {
	Pending
	InboundQueue
	State
	// Claim reserves the store for one client (package client claims the
	// store it runs on): until release is called or the store is closed,
	// another Claim fails with ErrInUse, so that two clients never hold
	// the same sessions. release may be called more than once. Returns
	// ErrClosed after Close.
	Claim() (release func(), err error)
	// Close releases the store; closing it again returns nil. Other calls
	// after Close return ErrClosed, or ErrInvalidArgument for malformed
	// arguments that a call checks before it reaches the store's data.
	Close() error
	storemark.Implementation
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
	InsertPending(ctx context.Context, recipient DeviceAddress, id LogicalMessageID, plaintext []byte) (int64, error)
	// PendingMessages returns the page selected by req: the rows that open as
	// Messages, the rows that do not as Unreadable (never an error for
	// them), and a cursor past both. For a req.Recipient, a row SQL
	// selected whose recipient is not req.Recipient byte for byte (a
	// writer of the file can re-declare a column's collation) is
	// Unreadable with ErrCorruptRow, never opened. Returns
	// ErrInvalidArgument if req does not validate or its cursor is
	// negative (see PageRequest.After).
	PendingMessages(ctx context.Context, req PageRequest) (PendingMessagePage, error)
	// PendingMessageCount counts pending messages, all or for one recipient,
	// without opening any. Returns ErrInvalidArgument for a malformed
	// recipient.
	PendingMessageCount(ctx context.Context, recipient *DeviceAddress) (int64, error)
	// AbandonPending removes the pending message (recipient, id) without
	// opening it and reports whether one was there. It also removes a
	// row naming (recipient, id) with a user id or logical id of the wrong
	// storage class (see ErrCorruptRow), so that every unreadable entry a
	// page reports with a decoded Recipient and ID can be abandoned.
	// Returns ErrInvalidArgument for a malformed recipient.
	AbandonPending(ctx context.Context, recipient DeviceAddress, id LogicalMessageID) (bool, error)
	// AbandonPendingMessage removes, without opening it, the pending row
	// m was read from, and reports whether one was there: the row at
	// m.Sequence if its recipient and logical id, decoded as a page
	// reports them, are m.Recipient and m.ID (a damaged row too, also one
	// whose recipient or id do not decode: sequences are never reused, so
	// the sequence names that row only); otherwise, if m.Recipient is well
	// formed, the pending message (m.Recipient, m.ID) as AbandonPending
	// removes it.
	AbandonPendingMessage(ctx context.Context, m PendingMessage) (bool, error)
	// NextPendingMessage returns the first pending message for recipient with a
	// sequence greater than *after (any sequence if after is nil), or an
	// error matching ErrNotFound. If that row cannot be opened the error
	// holds an *UnreadableError (errors.As) with it, so that the caller
	// can step past its sequence; a row stored for another recipient than
	// recipient byte for byte is such a row (ErrCorruptRow). Returns ErrInvalidArgument for
	// a malformed recipient or a negative cursor (see PageRequest.After).
	NextPendingMessage(ctx context.Context, recipient DeviceAddress, after *int64) (PendingMessage, error)
	// PendingByID returns the pending message (recipient, id), or an error
	// matching ErrNotFound if none is pending. If its row cannot be opened
	// the error holds an *UnreadableError (errors.As) with it, as
	// NextPendingMessage's. A send keyed by the application's id reads it
	// to tell a message sent again from another one reusing its id.
	// Returns ErrInvalidArgument for a malformed recipient.
	PendingByID(ctx context.Context, recipient DeviceAddress, id LogicalMessageID) (PendingMessage, error)
	// PendingRecipients returns the page selected by req: each recipient
	// with at least one pending message (readable or not), once, in
	// address order, without opening any message. A store may read a page
	// in several steps, each of one snapshot, each going on after the last
	// recipient the one before listed. Pages walked with their cursors
	// skip and repeat no recipient that stays pending throughout; a
	// recipient whose last message goes before the walk (or the step of a
	// page) reaches it is simply absent, one that gets its first after the
	// walk passed its address appears in a later walk. A row
	// whose recipient columns hold another storage class than the schema
	// declares names no address and is not listed (pages report it as
	// unreadable). Returns ErrInvalidArgument if req does not validate.
	PendingRecipients(ctx context.Context, req RecipientPageRequest) (PendingRecipientPage, error)
}

// LocalIdentity is this device's address and its serialized private
// identity and prekeys (opaque to the store, sealed at rest).
type LocalIdentity struct {
	Address DeviceAddress
	Secret  []byte
}

// State is the rest of the client's persisted state. Values are opaque
// bytes to the store, sealed at rest and bound to their row.
type State interface {
	// LocalIdentity returns this device's identity, or ErrNotFound before
	// SaveLocalIdentity; ErrCorruptRow if the stored row's columns hold
	// values the schema never stores (a device id rewritten as TEXT), or
	// the seal error if it does not open.
	LocalIdentity(ctx context.Context) (LocalIdentity, error)
	// SaveLocalIdentity stores this device's identity for the first time,
	// or replaces its secret if the address is the same. Returns
	// ErrInvalidArgument for a malformed address or a different address
	// than the one already stored, ErrCorruptRow if the stored row is
	// corrupt (as LocalIdentity).
	SaveLocalIdentity(ctx context.Context, id LocalIdentity) error

	// Peer returns the session, unanswered initiation and identity pin
	// held for peer; absent ones are nil. If any part does not open it
	// returns no state and a *PeerUnreadableError (matching
	// ErrPeerUnreadable and each cause) naming every part that does not
	// (client.Client.DiscardUnreadablePeerState removes them). Returns
	// ErrInvalidArgument for a malformed peer.
	Peer(ctx context.Context, peer DeviceAddress) (PeerState, error)
	// SavePeer writes the given parts of peer's state in one transaction:
	// a nil field is left unchanged, a non-nil empty one is deleted (the
	// pin cannot be deleted).
	SavePeer(ctx context.Context, peer DeviceAddress, update PeerState) error

	// ReadPeerParts returns each part of peer's stored state (session,
	// unanswered initiation, identity pin) as stored, and opened or with
	// the error it does not open with (see PeerReading). Absent parts are
	// nil everywhere. Returns ErrInvalidArgument for a malformed peer.
	ReadPeerParts(ctx context.Context, peer DeviceAddress) (PeerReading, error)
	// DiscardPeerParts removes, in one transaction, each part of peer's
	// state that damage names (a non-nil cause), but only if each of them
	// still holds the sealed value read.Sealed has for it: otherwise it
	// removes nothing and returns an error matching ErrPeerChanged. It
	// returns what it removed, each part with its cause from damage; if
	// damage names no part it returns the zero PeerDamage and changes
	// nothing. If it removes the pin and pin is not nil, pin is stored
	// (sealed) in its place in the same transaction. Pending messages and
	// every other row are left as they are. Returns ErrInvalidArgument for
	// a malformed peer.
	DiscardPeerParts(ctx context.Context, peer DeviceAddress, pin []byte, read PeerReading, damage PeerDamage) (PeerDamage, error)
	// Pins calls fn with every stored identity pin, in address order:
	// opened, or nil with the error it does not open with (a seal error,
	// or ErrCorruptRow for a row whose address columns the schema never
	// stores, whose address is then the zero one). A pin that does not
	// open does not stop the walk; an error fn returns does, and Pins
	// returns it. The pins are read in batches, each in a read transaction
	// of its own, so a pin written during the walk may be seen or not.
	Pins(ctx context.Context, fn func(peer DeviceAddress, pin []byte, err error) error) error
	// ForgetPeer removes, in one transaction, what peer made the store
	// hold as a sender: its session, unanswered initiation and identity
	// pin, its pending inbound messages (without opening them; nothing
	// acknowledges them) and the ids of its messages processed. Pending
	// outbound messages to peer and every other device's rows are kept.
	// It returns what it removed; a peer with nothing stored removes
	// nothing and is no error. Returns ErrInvalidArgument for a malformed
	// peer.
	ForgetPeer(ctx context.Context, peer DeviceAddress) (ForgottenPeer, error)

	// CommitSend stores a new pending message (as InsertPending) and
	// peer's advanced state (as SavePeer) in one transaction, and returns
	// the message's sequence: the message is pending exactly when the
	// session that encrypted it is stored. Returns ErrInvalidArgument for a
	// malformed peer or a plaintext longer than MaxPlaintextSize,
	// ErrDuplicate if (peer, id) is already pending.
	CommitSend(ctx context.Context, peer DeviceAddress, id LogicalMessageID, plaintext []byte, update PeerState) (int64, error)
	// CommitSendMany is CommitSend for one logical message to several
	// devices: in one transaction it stores a pending message (id,
	// plaintext) for each peer and saves each peer's update, and returns
	// the sequences in the order of peers. Either all of it commits or
	// nothing does. Returns ErrInvalidArgument for an empty list, a peer
	// listed twice, a malformed peer or an update deleting a pin;
	// ErrDuplicate if (peer, id) is already pending for any of them.
	CommitSendMany(ctx context.Context, id LogicalMessageID, plaintext []byte, peers []PeerUpdate) ([]int64, error)

	// CommitReceived applies in (peer's advanced state, and the local
	// identity if a one-time prekey was used) and records the message id
	// from peer, in one transaction: a new message is sealed into the
	// pending inbound queue and its id recorded as processed
	// (ReceivedNew, with its sequence); a message pending inbound already
	// stores nothing new (ReceivedPending, with the pending row's
	// sequence); a message processed before and no longer pending is a
	// duplicate (ReceivedBefore). in is applied either way. Returns
	// ErrInvalidArgument as SavePeer and SaveLocalIdentity do, and for a
	// plaintext longer than MaxPlaintextSize.
	CommitReceived(ctx context.Context, peer DeviceAddress, id LogicalMessageID, plaintext []byte, in Inbound) (Received, error)
	// CommitAck applies in and deletes the pending message (peer, id), in
	// one transaction, reporting whether one was there (the ACK's
	// cleared). Returns ErrInvalidArgument as CommitReceived does.
	CommitAck(ctx context.Context, peer DeviceAddress, id LogicalMessageID, in Inbound) (bool, error)
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

// PeerState is what the client keeps about one remote device. In reads,
// nil means absent. In SavePeer, nil means unchanged and an empty non-nil
// slice means delete.
type PeerState struct {
	Session    []byte
	Initiation []byte
	Pin        []byte
}

// ForgottenPeer is what ForgetPeer removed of one remote device.
type ForgottenPeer struct {
	// Session, Initiation and Pin report whether each was stored.
	Session, Initiation, Pin bool
	// Inbound is the number of its pending inbound messages removed.
	Inbound int64
	// Processed is the number of its processed message ids removed.
	Processed int64
}

// PeerReading is what ReadPeerParts read of a remote device's state.
type PeerReading struct {
	// Sealed is each part as stored; DiscardPeerParts compares with it.
	Sealed PeerState
	// Opened is the plaintext of each part that opens.
	Opened PeerState
	// Unopened is, for each part that does not open with any key the
	// keyring holds, the seal error.
	Unopened PeerDamage
}

// PeerUpdate is one device of a CommitSendMany: its address and the
// update of its state (as SavePeer) that commits with its pending message.
type PeerUpdate struct {
	Peer   DeviceAddress
	Update PeerState
}
