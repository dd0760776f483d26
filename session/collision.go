package session

import "github.com/securemsg/storage/store"

// CollisionWinner returns which of two initiators' initiations wins a
// simultaneous initiation: the one whose initiator address is smaller by
// store.DeviceAddress.Less. Both devices apply the same rule to the same
// pair of addresses, so they agree; a tie is impossible because the two
// initiators of a collision are different devices. Receive applies it.
func CollisionWinner(a, b store.DeviceAddress) store.DeviceAddress {
	if b.Less(a) {
		return b
	}
	return a
}

// LostInitiation describes the envelopes this device sent on an initiation
// that lost a collision: they will never be decrypted by the peer and must
// be re-sent on the winning session (the client keeps them pending until
// acknowledged, so a retry after convergence does exactly that).
type LostInitiation struct {
	InitiationID InitiationID
	Remote       store.DeviceAddress
	// MessageNumbers are the ratchet message numbers (RatchetHeader.N) of
	// the envelopes sent carrying the lost initiation header, ascending.
	MessageNumbers []uint32
}
