// Package storeimpl holds what the two store implementations
// (store/sqlitestore and store/memstore) and the client share beyond the
// contract in package store: the argument checks and their error texts
// (storeimpl.go), each call's error context (op.go), the table of the
// parts of a peer's state (storeimpl.go), sealing and opening the values
// the stores write and the storage key's verifier (seal.go), the
// recipients' page (recipients.go) and the walks built on the contract's
// calls (walk.go).
// Being internal, none of it is an application's API.
package storeimpl

import (
	"bytes"
	"context"
	"fmt"

	"github.com/securemsg/storage/internal/nilarg"
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

// CheckKeyring returns the error both stores give for a keyring they
// cannot seal with: one wrapping ErrInvalidArgument for nil, and one
// wrapping ErrInvalidArgument and seal.ErrKey for a keyring holding no
// key (the zero Keyring; seal.NewKeyring makes every other one, and it
// and Keyring.Add refuse the zero Key).
func CheckKeyring(keys seal.Sealer) error {
	if nilarg.Is(keys) {
		return fmt.Errorf("%w: nil keyring", store.ErrInvalidArgument)
	}
	if len(keys.KeyIDs()) == 0 {
		return fmt.Errorf("%w: %w: the keyring holds no key (make it with seal.NewKeyring)", store.ErrInvalidArgument, seal.ErrKey)
	}
	return nil
}

// ValidateInbound returns an error wrapping store.ErrInvalidArgument if in's update
// would delete the pin or its local identity has a malformed address.
func ValidateInbound(in store.Inbound) error {
	if err := ValidateUpdate(in.Update); err != nil {
		return err
	}
	if in.Local != nil {
		return in.Local.Address.Validate()
	}
	return nil
}

// PeerPart is one part of a remote device's stored state: its name, the
// record type it is sealed as, its field in a PeerState and its cause in
// a store.PeerDamage. PeerParts is the one table of them.
type PeerPart struct {
	Part   store.PeerPart
	Record seal.RecordType
	State  func(*store.PeerState) *[]byte
	Damage func(*store.PeerDamage) *error
}

// PeerParts lists the parts of a remote device's stored state, in the
// order session, initiation, pin; every walk over the parts reads it.
var PeerParts = [...]PeerPart{
	{store.PeerSession, seal.RecordSession, func(s *store.PeerState) *[]byte { return &s.Session }, func(d *store.PeerDamage) *error { return &d.Session }},
	{store.PeerInitiation, seal.RecordSessionInitiation, func(s *store.PeerState) *[]byte { return &s.Initiation }, func(d *store.PeerDamage) *error { return &d.Initiation }},
	{store.PeerPin, seal.RecordIdentityPin, func(s *store.PeerState) *[]byte { return &s.Pin }, func(d *store.PeerDamage) *error { return &d.Pin }},
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

// Unchanged reports whether current, the sealed state stored now, holds
// for each part damage names the same sealed value as r.Sealed.
func Unchanged(r store.PeerReading, current store.PeerState, damage store.PeerDamage) bool {
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
func DiscardUnreadablePeer(ctx context.Context, st store.State, peer store.DeviceAddress, pin []byte, check PeerCheck) (store.PeerDamage, error) {
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

// ValidatePeerUpdates returns an error wrapping ErrInvalidArgument if
// peers is empty, lists a device twice, or holds a malformed address or
// an update deleting a pin.
func ValidatePeerUpdates(peers []store.PeerUpdate) error {
	if len(peers) == 0 {
		return fmt.Errorf("%w: no peer", store.ErrInvalidArgument)
	}
	seen := make(map[store.DeviceAddress]struct{}, len(peers))
	for _, p := range peers {
		if err := p.Peer.Validate(); err != nil {
			return err
		}
		if err := ValidateUpdate(p.Update); err != nil {
			return fmt.Errorf("%s: %w", p.Peer, err)
		}
		if err := ListedOnce(seen, p.Peer); err != nil {
			return err
		}
	}
	return nil
}

// ListedOnce records a in seen, the addresses a list has given so far,
// and returns an error wrapping store.ErrInvalidArgument if a is among
// them: a message goes to each device once.
func ListedOnce(seen map[store.DeviceAddress]struct{}, a store.DeviceAddress) error {
	if _, dup := seen[a]; dup {
		return fmt.Errorf("%w: %s listed twice", store.ErrInvalidArgument, a)
	}
	seen[a] = struct{}{}
	return nil
}

// CheckPlaintext returns an error wrapping store.ErrInvalidArgument if
// plaintext is longer than store.MaxPlaintextSize.
func CheckPlaintext(plaintext []byte) error {
	if len(plaintext) > store.MaxPlaintextSize {
		return fmt.Errorf("%w: plaintext is %d bytes, limit %d", store.ErrInvalidArgument, len(plaintext), store.MaxPlaintextSize)
	}
	return nil
}

// InUse is the error of a Claim on a store that already serves a client.
func InUse() error {
	return fmt.Errorf("%w: it already serves a client", store.ErrInUse)
}

// Duplicate is the error of inserting the pending message id for to
// while one is pending.
func Duplicate(to store.DeviceAddress, id store.LogicalMessageID) error {
	return fmt.Errorf("%s for %s: %w", id, to, store.ErrDuplicate)
}

// OtherDevice is the error of saving the local identity of another
// device than owner, the one the store holds.
func OtherDevice(owner store.DeviceAddress) error {
	return fmt.Errorf("%w: the store belongs to %s", store.ErrInvalidArgument, owner)
}

// ValidateUpdate returns an error wrapping store.ErrInvalidArgument if u, used
// as a SavePeer update, would delete the identity pin.
func ValidateUpdate(u store.PeerState) error {
	if u.Pin != nil && len(u.Pin) == 0 {
		return fmt.Errorf("%w: an identity pin cannot be deleted", store.ErrInvalidArgument)
	}
	return nil
}
