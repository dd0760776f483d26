// Package rowseal seals and opens the values the stores write, each bound
// to its row by its record type and associated data (AddressAD,
// MessageAD, KeyVerifierAD, all defined here). The SQLite and in-memory
// stores both use it, so that they seal identically
// and open exactly the same records; the SQLite store and package legacy
// seal and open the storage key verifiers with it.
//
// Package rowseal never touches storage.
package rowseal

import (
	"encoding/binary"
	"fmt"

	"github.com/securemsg/storage/internal/storeimpl"

	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// Insert validates and seals what inserting a pending message writes:
// the sealed message and, if update is not nil, the peer update with its
// values sealed (see SealPeer). It returns store.ErrInvalidArgument for a
// malformed recipient, a plaintext longer than store.MaxPlaintextSize or
// an update deleting the pin.
func Insert(keys *seal.Keyring, to store.DeviceAddress, id store.LogicalMessageID, plaintext []byte, update *store.PeerState) ([]byte, *store.PeerState, error) {
	if err := to.Validate(); err != nil {
		return nil, nil, err
	}
	if len(plaintext) > store.MaxPlaintextSize {
		return nil, nil, fmt.Errorf("%w: plaintext is %d bytes, limit %d", store.ErrInvalidArgument, len(plaintext), store.MaxPlaintextSize)
	}
	sealed, err := keys.Seal(seal.RecordPendingOutbound, MessageAD(to, id), plaintext)
	if err != nil {
		return nil, nil, err
	}
	if update == nil {
		return sealed, nil, nil
	}
	if err := storeimpl.ValidateUpdate(*update); err != nil {
		return nil, nil, err
	}
	peer, err := SealPeer(keys, to, *update)
	if err != nil {
		return nil, nil, err
	}
	return sealed, &peer, nil
}

// SealedSend is one device's part of InsertMany: its address, its sealed
// pending message and its update with the values sealed.
type SealedSend struct {
	Peer    store.DeviceAddress
	Message []byte
	Update  store.PeerState
}

// InsertMany validates peers (storeimpl.ValidatePeerUpdates) and seals, for
// each, what Insert seals: the message (id, plaintext) bound to that
// peer's row, and its update. It returns store.ErrInvalidArgument as
// storeimpl.ValidatePeerUpdates does.
func InsertMany(keys *seal.Keyring, id store.LogicalMessageID, plaintext []byte, peers []store.PeerUpdate) ([]SealedSend, error) {
	if err := storeimpl.ValidatePeerUpdates(peers); err != nil {
		return nil, err
	}
	out := make([]SealedSend, len(peers))
	for i, p := range peers {
		msg, update, err := Insert(keys, p.Peer, id, plaintext, &p.Update)
		if err != nil {
			return nil, err
		}
		out[i] = SealedSend{Peer: p.Peer, Message: msg, Update: *update}
	}
	return out, nil
}

// Row is a pending row as a store read it, its columns decoded.
type Row struct {
	Seq    int64
	To     store.DeviceAddress
	ID     store.LogicalMessageID
	Sealed []byte
	// Corrupt says what the row's columns hold that the schema never
	// stores ("" if nothing): such a row is reported, never opened.
	Corrupt string
}

// OpenPending opens a pending message read from its row r, for the
// recipient want (nil: a read of every recipient's rows). A row that must
// not be opened comes back as an unreadable entry instead, with the
// reason as its cause, and the caller reports it and goes on with the
// other rows: a corrupt row (store.ErrCorruptRow), a row read for want
// that is stored for another recipient (store.ErrCorruptRow: SQL selected
// it, but only an exact byte for byte match is want's row), a row with a
// malformed recipient (store.ErrCorruptRow), or a sealed value the
// keyring refuses (the seal error).
func OpenPending(keys *seal.Keyring, r Row, want *store.DeviceAddress) (store.PendingMessage, *store.UnreadablePendingMessage) {
	if bad := Check(r, want); bad != nil {
		return store.PendingMessage{}, bad
	}
	pt, err := keys.Open(seal.RecordPendingOutbound, MessageAD(r.To, r.ID), r.Sealed)
	if err != nil {
		return store.PendingMessage{}, &store.UnreadablePendingMessage{PendingMessage: store.PendingMessage{Sequence: r.Seq, Recipient: r.To, ID: r.ID}, Cause: fmt.Errorf("pending sequence %d: %w", r.Seq, err)}
	}
	return store.PendingMessage{Sequence: r.Seq, Recipient: r.To, ID: r.ID, Plaintext: pt}, nil
}

// Check returns the unreadable entry of r if its columns may not be
// opened as a pending message for want (see OpenPending), nil if they
// may. A recipient equal to want is valid, as want was validated.
func Check(r Row, want *store.DeviceAddress) *store.UnreadablePendingMessage {
	switch {
	case r.Corrupt != "":
		return corrupt(r, "%s", r.Corrupt)
	case want != nil && r.To != *want:
		return corrupt(r, "stored for recipient %q device %d, read for recipient %q device %d", r.To.UserID, r.To.DeviceID, want.UserID, want.DeviceID)
	case want == nil:
		if err := r.To.Validate(); err != nil {
			return corrupt(r, "recipient %q: %v", r.To, err)
		}
	}
	return nil
}

// corrupt returns the unreadable entry of a row whose stored values the
// schema never holds, its cause matching store.ErrCorruptRow and saying
// what is wrong.
func corrupt(r Row, format string, args ...any) *store.UnreadablePendingMessage {
	return &store.UnreadablePendingMessage{PendingMessage: store.PendingMessage{Sequence: r.Seq, Recipient: r.To, ID: r.ID},
		Cause: fmt.Errorf("pending sequence %d: %w: %s", r.Seq, store.ErrCorruptRow, fmt.Sprintf(format, args...))}
}

// Page builds the page of the rows a store read for a page of limit, for
// the recipient want (nil: every recipient's): rows in ascending
// sequence order, at most limit + 1 of them (the last one only says that
// another page follows, and is never opened). Each returned row is opened
// (OpenPending) into Messages or reported in Unreadable;
// NextAfterSequence is the last returned sequence if more follow.
func Page(keys *seal.Keyring, rows []Row, limit int, want *store.DeviceAddress) store.PendingMessagePage {
	var page store.PendingMessagePage
	if len(rows) > limit {
		rows = rows[:limit]
		next := rows[len(rows)-1].Seq
		page.NextAfterSequence = &next
	}
	page.Messages = make([]store.PendingMessage, 0, len(rows))
	for _, r := range rows {
		m, bad := OpenPending(keys, r, want)
		if bad != nil {
			page.Unreadable = append(page.Unreadable, *bad)
			continue
		}
		page.Messages = append(page.Messages, m)
	}
	return page
}

// SealPeer returns u with every non-empty part sealed for peer; nil
// (unchanged) and empty (delete) parts stay as they are.
func SealPeer(keys *seal.Keyring, peer store.DeviceAddress, u store.PeerState) (store.PeerState, error) {
	ad := AddressAD(peer)
	for _, p := range storeimpl.PeerParts {
		f := p.State(&u)
		if len(*f) == 0 {
			continue
		}
		v, err := keys.Seal(p.Record, ad, *f)
		if err != nil {
			return store.PeerState{}, err
		}
		*f = v
	}
	return u, nil
}

// OpenPeer opens the sealed parts of a peer's stored state; absent (nil)
// parts stay nil. If any part does not open it returns a
// *store.PeerUnreadableError naming every part that does not.
func OpenPeer(keys *seal.Keyring, peer store.DeviceAddress, sealed store.PeerState) (store.PeerState, error) {
	out, damage := OpenPeerParts(keys, peer, sealed)
	if damage.Damaged() {
		return store.PeerState{}, &store.PeerUnreadableError{Peer: peer, Damage: damage}
	}
	return out, nil
}

// OpenPeerParts opens each sealed part of a peer's stored state on its
// own: a part that opens comes back opened, one that does not comes back
// nil with its cause in the damage; absent (nil) parts stay nil.
func OpenPeerParts(keys *seal.Keyring, peer store.DeviceAddress, sealed store.PeerState) (store.PeerState, store.PeerDamage) {
	ad := AddressAD(peer)
	var damage store.PeerDamage
	for _, p := range storeimpl.PeerParts {
		f := p.State(&sealed)
		if *f == nil {
			continue
		}
		pt, err := keys.Open(p.Record, ad, *f)
		if err != nil {
			*p.Damage(&damage) = err
			*f = nil
			continue
		}
		*f = pt
	}
	return sealed, damage
}

// ReadPeerParts returns the reading of peer's sealed state (see
// store.PeerReading): each part as stored, and opened or with its seal
// error.
func ReadPeerParts(keys *seal.Keyring, peer store.DeviceAddress, sealed store.PeerState) store.PeerReading {
	opened, damage := OpenPeerParts(keys, peer, sealed)
	return store.PeerReading{Sealed: sealed, Opened: opened, Unopened: damage}
}

// SealKeyVerifier seals text as the storage key verifier of keys' current
// key and returns that key's id (the storage_key row the verifier belongs
// to) with the sealed value: a verifier is always sealed by the key it
// names, which only its holder can do. text is KeyVerifierText, or
// starts with it (KeyVerifierSealedQueue, package legacy's proof).
// It returns the keyring's sealing error.
func SealKeyVerifier(keys *seal.Keyring, text []byte) (seal.KeyID, []byte, error) {
	id := keys.Current()
	v, err := keys.Seal(seal.RecordKeyVerifier, KeyVerifierAD(id), text)
	if err != nil {
		return 0, nil, err
	}
	return id, v, nil
}

// OpenKeyVerifier opens the verifier recorded for storage key id and
// returns the text it seals; the keyring's error (seal.ErrWrongKey,
// seal.ErrAuthentication, ...) if it does not open.
func OpenKeyVerifier(keys *seal.Keyring, id seal.KeyID, verifier []byte) ([]byte, error) {
	return keys.Open(seal.RecordKeyVerifier, KeyVerifierAD(id), verifier)
}

// AddressAD is the associated data binding a sealed value to the row of
// one remote device (identity pin, session, session initiation) or to the
// local identity.
func AddressAD(a store.DeviceAddress) []byte {
	return seal.AD([]byte(a.UserID), binary.BigEndian.AppendUint64(nil, uint64(a.DeviceID)))
}

// MessageAD is the associated data binding a sealed message to its row:
// the remote device (recipient or sender) and the logical id.
func MessageAD(a store.DeviceAddress, id store.LogicalMessageID) []byte {
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
