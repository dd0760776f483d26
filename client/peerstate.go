package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/securemsg/storage/internal/storeimpl"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

// discardedPinIdentity is the identity a discarded pin is replaced with:
// no device can show it. Its signing key is the encoding of y = 2, for
// which no x exists on the Ed25519 curve, so it decodes to no point and
// no signature verifies under it (crypto/ed25519 refuses a key that does
// not decode; a merely non-canonical encoding would not do, as it may
// still name a point). Its X25519 key is u = 18 (0xff..ff, top bit
// ignored), a fixed point whose private key no one knows, so no
// initiation authenticates as it. Every identity seen next therefore
// differs from it and is recorded as a change.
var discardedPinIdentity = func() session.PublicIdentity {
	var id session.PublicIdentity
	id.SigningKey[0] = 2
	for i := range id.DHKey {
		id.DHKey[i] = 0xff
	}
	return id
}()

// PinDiscarded reports whether pinned, the Pinned identity of a
// *session.IdentityChangedError, is what DiscardUnreadablePeerState left
// in place of a damaged pin: no identity of that device was known, and the
// one observed has not been verified by anyone. An application shows such
// a change as a new, unverified device rather than as a key change.
func PinDiscarded(pinned session.PublicIdentity) bool {
	return pinned == discardedPinIdentity
}

// DiscardUnreadablePeerState removes, in one storage transaction, the
// parts of remote's stored state that do not open or that open but do not
// decode (see store.ErrPeerUnreadable), never a part that opens and
// decodes, and returns which it removed. It reads the parts, decodes them
// (the decoding every call loading remote's state does) outside any
// transaction, then removes the damaged ones only if each still holds the
// value it read, so a part it keeps is one those calls accept. After it, calls for remote work again: a send or retry
// starts a new session if the session was removed (fetching remote's
// bundle), and remote can start one by an initiation. Pending messages to
// remote are kept, for RetryPendingMessages; inbound bookkeeping and every
// other device's state are not touched. It holds the send mutex and drops
// the client's cached state of remote.
//
// A removed session loses its ratchet state: envelopes remote sent on it
// and not yet received no longer decrypt. A removed identity pin is
// replaced, in the same transaction, by a pin that trusts no identity:
// the next identity seen for remote (in the bundle of the next session, or
// in an initiation from remote) is not trusted on first use but reported
// as session.ErrIdentityChanged, with a Pinned identity for which PinDiscarded is
// true, and nothing is sent to or accepted from remote until
// AcceptRemoteIdentityChange. The application should show remote as
// unverified and have the user compare fingerprints before accepting. A
// session that was kept stays in the store but is not used while the pin
// trusts no identity (its states are of another identity than the pin's:
// see session.Session.Trusting): the identity must be accepted first, and
// envelopes remote sent on that session no longer decrypt.
//
// If every part opens and decodes (or remote has no state) it removes
// nothing and returns the zero store.PeerDamage with no error, so that
// a repeated call is harmless. Returns ErrNotInitialized before Initialize,
// store.ErrInvalidArgument for a malformed address, an error matching
// store.ErrPeerChanged if a part it was to remove changed after it read it
// (nothing was removed; call it again), and the store's error (then
// nothing was removed).
func (c *Client) DiscardUnreadablePeerState(ctx context.Context, remote store.DeviceAddress) (store.PeerDamage, error) {
	if err := c.checkInitialized(); err != nil {
		return store.PeerDamage{}, fmt.Errorf("client: discard unreadable state: %w", err)
	}
	if err := remote.Validate(); err != nil {
		return store.PeerDamage{}, fmt.Errorf("client: discard unreadable state: %w", err)
	}
	pin, err := session.NewPin(remote, discardedPinIdentity).MarshalBinary()
	if err != nil {
		return store.PeerDamage{}, fmt.Errorf("client: discard unreadable state of %s: %w", remote, err)
	}
	if err := c.lockSend(); err != nil {
		return store.PeerDamage{}, fmt.Errorf("client: discard unreadable state of %s: %w", remote, err)
	}
	defer c.sendMu.Unlock()
	// The cached state was loaded before the damage was found (or holds
	// none): the next call reloads what the store holds.
	defer c.forget(remote)
	// The pin that replaces a damaged one is no first contact's.
	c.firstContacts = nil
	d, err := storeimpl.DiscardUnreadablePeer(ctx, c.st, remote, pin, checkPeerPart)
	if err != nil {
		return store.PeerDamage{}, fmt.Errorf("client: discard unreadable state of %s: %w", remote, err)
	}
	return d, nil
}

// decodePeer decodes the opened state st of addr. Each part that does not
// decode is left out of the peer and named in the damage, with the
// decoding error (matching session.ErrMalformedState) as its cause.
func decodePeer(addr store.DeviceAddress, st store.PeerState) (*peer, store.PeerDamage) {
	p := &peer{addr: addr}
	var damage store.PeerDamage
	if st.Session != nil {
		s, err := session.UnmarshalSession(st.Session)
		if err != nil {
			damage.Session = undecodable(err)
		}
		p.sess = s
	}
	if st.Initiation != nil {
		if err := decodeInitiation(st.Initiation); err != nil {
			damage.Initiation = undecodable(err)
		}
		var id session.InitiationID
		copy(id[:], st.Initiation)
		p.initiation = &id
	}
	if st.Pin != nil {
		if pin, err := session.UnmarshalPin(st.Pin); err != nil {
			damage.Pin = undecodable(err)
		} else {
			p.pin = &pin
		}
	}
	return p, damage
}

// checkPeerPart is the storeimpl.PeerCheck of DiscardUnreadablePeerState: it
// refuses exactly the opened values decodePeer does not decode.
func checkPeerPart(part store.PeerPart, plaintext []byte) error {
	p, ok := storeimpl.PartOf(part)
	if !ok {
		return fmt.Errorf("%w: unknown peer state part %v", store.ErrInvalidArgument, part)
	}
	st := store.PeerState{}
	*p.State(&st) = plaintext
	_, damage := decodePeer(store.DeviceAddress{}, st)
	return errors.Join(damage.Session, damage.Initiation, damage.Pin)
}

// decodeInitiation checks a stored initiation marker: the id of the
// unanswered initiation (see peer.update), nothing else.
func decodeInitiation(b []byte) error {
	if len(b) != len(session.InitiationID{}) {
		return fmt.Errorf("%w: initiation marker of %d bytes, want %d", session.ErrMalformedState, len(b), len(session.InitiationID{}))
	}
	return nil
}

// undecodable is the cause of a part that opened but did not decode.
func undecodable(err error) error {
	return fmt.Errorf("opens but does not decode: %w", err)
}
