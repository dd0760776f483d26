// Package rowseal seals and opens the values the stores write, each bound
// to its row (record type and store.AddressAD / store.MessageAD). The
// SQLite and in-memory stores both use it, so that they seal identically
// and open exactly the same records.
//
// Package rowseal never touches storage.
package rowseal

import (
	"fmt"

	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// Insert validates and seals what inserting a pending message writes:
// the sealed message and, if update is not nil, the peer update with its
// values sealed (see SealPeer). It returns store.ErrInvalidArgument for a
// malformed recipient, a plaintext longer than store.MaxPlaintextSize or
// an update deleting the pin.
func Insert(keys *seal.Keyring, to ids.DeviceAddress, id ids.LogicalMessageID, plaintext []byte, update *store.PeerState) ([]byte, *store.PeerState, error) {
	if err := store.ValidateAddress(to); err != nil {
		return nil, nil, err
	}
	if len(plaintext) > store.MaxPlaintextSize {
		return nil, nil, fmt.Errorf("%w: plaintext is %d bytes, limit %d", store.ErrInvalidArgument, len(plaintext), store.MaxPlaintextSize)
	}
	sealed, err := keys.Seal(seal.RecordPendingOutbound, store.MessageAD(to, id), plaintext)
	if err != nil {
		return nil, nil, err
	}
	if update == nil {
		return sealed, nil, nil
	}
	if err := update.ValidateUpdate(); err != nil {
		return nil, nil, err
	}
	peer, err := SealPeer(keys, to, *update)
	if err != nil {
		return nil, nil, err
	}
	return sealed, &peer, nil
}

// OpenPending opens a pending message read from its row.
func OpenPending(keys *seal.Keyring, seq int64, to ids.DeviceAddress, id ids.LogicalMessageID, sealed []byte) (store.PendingMessage, error) {
	pt, err := keys.Open(seal.RecordPendingOutbound, store.MessageAD(to, id), sealed)
	if err != nil {
		return store.PendingMessage{}, fmt.Errorf("pending sequence %d: %w", seq, err)
	}
	return store.PendingMessage{Sequence: seq, Recipient: to, ID: id, Plaintext: pt}, nil
}

// peerFields lists the parts of a PeerState with their record types.
func peerFields(p *store.PeerState) []struct {
	rt seal.RecordType
	v  *[]byte
} {
	return []struct {
		rt seal.RecordType
		v  *[]byte
	}{
		{seal.RecordSession, &p.Session},
		{seal.RecordSessionInitiation, &p.Initiation},
		{seal.RecordIdentityPin, &p.Pin},
	}
}

// SealPeer returns u with every non-empty part sealed for peer; nil
// (unchanged) and empty (delete) parts stay as they are.
func SealPeer(keys *seal.Keyring, peer ids.DeviceAddress, u store.PeerState) (store.PeerState, error) {
	ad := store.AddressAD(peer)
	for _, f := range peerFields(&u) {
		if len(*f.v) == 0 {
			continue
		}
		v, err := keys.Seal(f.rt, ad, *f.v)
		if err != nil {
			return store.PeerState{}, err
		}
		*f.v = v
	}
	return u, nil
}

// OpenPeer opens the sealed parts of a peer's stored state; absent (nil)
// parts stay nil.
func OpenPeer(keys *seal.Keyring, peer ids.DeviceAddress, sealed store.PeerState) (store.PeerState, error) {
	ad := store.AddressAD(peer)
	for _, f := range peerFields(&sealed) {
		if *f.v == nil {
			continue
		}
		pt, err := keys.Open(f.rt, ad, *f.v)
		if err != nil {
			return store.PeerState{}, err
		}
		*f.v = pt
	}
	return sealed, nil
}
