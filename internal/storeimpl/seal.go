package storeimpl

import (
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// The values both stores seal and open, each bound to its row by its
// record type and associated data (seal.AddressAD, seal.MessageAD,
// seal.KeyVerifierAD), so that the two stores seal identically; the
// SQLite store and package legacy seal and open the storage key
// verifiers here.

// MaxSealedMessageSize is the largest sealed value a store writes to a
// pending message row, outbound or inbound: a plaintext of
// store.MaxPlaintextSize, sealed. A longer stored value was written by
// someone else: the SQLite store measures every message row's value
// against this bound before it reads it (the octet_length beside it in
// each query that reads one) and reports the row unreadable without
// reading the value into memory.
const MaxSealedMessageSize = store.MaxPlaintextSize + seal.Overhead

// SealPending validates and seals what inserting a pending message writes:
// the sealed message and, if update is not nil, the peer update with its
// values sealed (see SealPeer). It returns store.ErrInvalidArgument for a
// malformed recipient, a plaintext longer than store.MaxPlaintextSize or
// an update deleting the pin.
func SealPending(keys seal.Sealer, to store.DeviceAddress, id store.LogicalMessageID, plaintext []byte, update *store.PeerState) ([]byte, *store.PeerState, error) {
	if err := to.Validate(); err != nil {
		return nil, nil, err
	}
	if err := CheckPlaintext(plaintext); err != nil {
		return nil, nil, err
	}
	sealed, err := keys.Seal(seal.RecordPendingOutbound, seal.MessageAD(to.UserID, to.DeviceID, id), plaintext)
	if err != nil {
		return nil, nil, err
	}
	if update == nil {
		return sealed, nil, nil
	}
	if err := ValidateUpdate(*update); err != nil {
		return nil, nil, err
	}
	peer, err := SealPeer(keys, to, *update)
	if err != nil {
		return nil, nil, err
	}
	return sealed, &peer, nil
}

// SealInbound validates and seals a received message for the pending
// inbound queue, bound to its sender and id. It returns
// store.ErrInvalidArgument for a plaintext longer than
// store.MaxPlaintextSize.
func SealInbound(keys seal.Sealer, from store.DeviceAddress, id store.LogicalMessageID, plaintext []byte) ([]byte, error) {
	if err := CheckPlaintext(plaintext); err != nil {
		return nil, err
	}
	return keys.Seal(seal.RecordPendingInbound, seal.MessageAD(from.UserID, from.DeviceID, id), plaintext)
}

// OpenInbound opens a pending inbound value sealed by SealInbound.
func OpenInbound(keys seal.Sealer, from store.DeviceAddress, id store.LogicalMessageID, sealed []byte) ([]byte, error) {
	return keys.Open(seal.RecordPendingInbound, seal.MessageAD(from.UserID, from.DeviceID, id), sealed)
}

// SealedSend is one device's part of SealPendingMany: its address, its sealed
// pending message and its update with the values sealed.
type SealedSend struct {
	Peer    store.DeviceAddress
	Message []byte
	Update  store.PeerState
}

// SealPendingMany validates peers (ValidatePeerUpdates) and seals, for
// each, what SealPending seals: the message (id, plaintext) bound to that
// peer's row, and its update. It returns store.ErrInvalidArgument as
// ValidatePeerUpdates does.
func SealPendingMany(keys seal.Sealer, id store.LogicalMessageID, plaintext []byte, peers []store.PeerUpdate) ([]SealedSend, error) {
	if err := ValidatePeerUpdates(peers); err != nil {
		return nil, err
	}
	out := make([]SealedSend, len(peers))
	for i, p := range peers {
		msg, update, err := SealPending(keys, p.Peer, id, plaintext, &p.Update)
		if err != nil {
			return nil, err
		}
		out[i] = SealedSend{Peer: p.Peer, Message: msg, Update: *update}
	}
	return out, nil
}

// SealLocal seals the local identity's secret, bound to its address.
func SealLocal(keys seal.Sealer, id store.LocalIdentity) ([]byte, error) {
	return keys.Seal(seal.RecordLocalIdentity, seal.AddressAD(id.Address.UserID, id.Address.DeviceID), id.Secret)
}

// OpenLocal opens the local identity's secret stored for addr.
func OpenLocal(keys seal.Sealer, addr store.DeviceAddress, sealed []byte) ([]byte, error) {
	return keys.Open(seal.RecordLocalIdentity, seal.AddressAD(addr.UserID, addr.DeviceID), sealed)
}

// SealPin seals pin as peer's identity pin.
func SealPin(keys seal.Sealer, peer store.DeviceAddress, pin []byte) ([]byte, error) {
	return keys.Seal(seal.RecordIdentityPin, seal.AddressAD(peer.UserID, peer.DeviceID), pin)
}

// OpenPin opens peer's identity pin sealed by SealPin.
func OpenPin(keys seal.Sealer, peer store.DeviceAddress, sealed []byte) ([]byte, error) {
	return keys.Open(seal.RecordIdentityPin, seal.AddressAD(peer.UserID, peer.DeviceID), sealed)
}

// SealPeer returns u with every non-empty part sealed for peer; nil
// (unchanged) and empty (delete) parts stay as they are.
func SealPeer(keys seal.Sealer, peer store.DeviceAddress, u store.PeerState) (store.PeerState, error) {
	ad := seal.AddressAD(peer.UserID, peer.DeviceID)
	for _, p := range PeerParts {
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
func OpenPeer(keys seal.Sealer, peer store.DeviceAddress, sealed store.PeerState) (store.PeerState, error) {
	out, damage := OpenPeerParts(keys, peer, sealed)
	if damage.Damaged() {
		return store.PeerState{}, &store.PeerUnreadableError{Peer: peer, Damage: damage}
	}
	return out, nil
}

// OpenPeerParts opens each sealed part of a peer's stored state on its
// own: a part that opens comes back opened, one that does not comes back
// nil with its cause in the damage; absent (nil) parts stay nil.
func OpenPeerParts(keys seal.Sealer, peer store.DeviceAddress, sealed store.PeerState) (store.PeerState, store.PeerDamage) {
	ad := seal.AddressAD(peer.UserID, peer.DeviceID)
	var damage store.PeerDamage
	for _, p := range PeerParts {
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
func ReadPeerParts(keys seal.Sealer, peer store.DeviceAddress, sealed store.PeerState) store.PeerReading {
	opened, damage := OpenPeerParts(keys, peer, sealed)
	return store.PeerReading{Sealed: sealed, Opened: opened, Unopened: damage}
}

// SealKeyVerifier seals text as the storage key verifier of keys' current
// key and returns that key's id (the storage_key row the verifier belongs
// to) with the sealed value: a verifier is always sealed by the key it
// names, which only its holder can do. text is KeyVerifierText, or
// starts with it (KeyVerifierSealedQueue, package legacy's proof).
// It returns the keyring's sealing error.
func SealKeyVerifier(keys seal.Sealer, text []byte) (seal.KeyID, []byte, error) {
	id := keys.Current()
	v, err := keys.Seal(seal.RecordKeyVerifier, seal.KeyVerifierAD(id), text)
	if err != nil {
		return 0, nil, err
	}
	return id, v, nil
}

// OpenKeyVerifier opens the verifier recorded for storage key id and
// returns the text it seals; the keyring's error (seal.ErrWrongKey,
// seal.ErrAuthentication, ...) if it does not open.
func OpenKeyVerifier(keys seal.Sealer, id seal.KeyID, verifier []byte) ([]byte, error) {
	return keys.Open(seal.RecordKeyVerifier, seal.KeyVerifierAD(id), verifier)
}

// KeyVerifierText is the known value a storage key's verifier seals
// (record type seal.RecordKeyVerifier, associated data seal.KeyVerifierAD):
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
