package session

import (
	"fmt"
	"slices"
	"time"

	"github.com/securemsg/storage/ids"
)

// Bounds of a session record.
const (
	// MaxArchivedStates is how many previous states of a session with one
	// device a record keeps (as libsignal does), so that late messages of a
	// replaced session still decrypt and a replay of its initiation is
	// recognised instead of starting a new session.
	MaxArchivedStates = 40
	// MaxRejectedInitiations is how many base keys of initiations rejected
	// by the collision rule a record remembers, so that a later copy of one
	// is rejected again instead of being taken for a new initiation.
	MaxRejectedInitiations = 40
)

// Local is the receiving device: what Receive needs to answer an
// initiation.
type Local struct {
	Identity *Identity
	Address  ids.DeviceAddress
	// Prekeys are never modified: Receive works on a copy and returns it
	// in Receipt.Prekeys when it changed.
	Prekeys *Prekeys
	// Now is the time against which retired signed prekeys expire (see
	// Prekeys.Rotate): an initiation naming one expired at Now fails with
	// ErrUnknownPrekey. The zero time expires none.
	Now time.Time
}

// Receipt is what Receive made of an envelope. Nothing is stored or
// changed by Receive itself: the caller stores Session (and Prekeys if not
// nil) in one transaction, after checking Initiator against its pin.
type Receipt struct {
	// Session is the peer's new session record to store, or nil when
	// nothing changes (a repeated copy of a rejected initiation).
	Session *Session
	// Plaintext is the decrypted message; nil if Rejected.
	Plaintext []byte
	// Prekeys, if not nil, are the local prekeys after answering a new
	// initiation (its one-time prekey consumed, expired signed prekeys
	// dropped): store them with Session.
	Prekeys *Prekeys
	// Initiator, if not nil, is the identity a new initiation just
	// authenticated (its X3DH agreement completed and its first message
	// decrypted). The caller checks it against the pin before storing
	// anything; an identity that is not the pinned one must not be used.
	Initiator *PublicIdentity
	// Rejected, if not nil, is the id of an initiation rejected by the
	// collision rule: its message is dropped (Plaintext nil) and its
	// sender re-sends it on the winning session. Session, if not nil,
	// then only remembers the rejected base key.
	Rejected *InitiationID
	// Lost lists what this device sent on its own initiation that lost a
	// collision (see ResolveCollision), or nil.
	Lost *LostInitiation
}

// Receive decides what an envelope from a remote device does to the
// session record current, held for it (nil if none), and decrypts it. It
// is the receiving rule of the client, and changes nothing it is given:
//
//  1. No initiation header: current (or one of its archived states)
//     decrypts it; nothing else may.
//  2. An initiation whose base key (ephemeral key) is that of the current
//     or an archived state this device answered is routed to that state:
//     a late message decrypts, a replay fails with ErrReplay. It never
//     builds a new session.
//  3. A copy of an initiation rejected before by the collision rule is
//     rejected again (Receipt.Rejected, Session nil).
//  4. Any other initiation is authenticated first, on a copy of the
//     prekeys: X3DH and the decryption of its message must succeed
//     (otherwise its error is returned, e.g. ErrDecrypt for a forgery,
//     ErrUnknownPrekey for a consumed one-time prekey or an expired signed
//     prekey). Then:
//     - no current session: it becomes the session;
//     - current is this device's own initiation, still unanswered: a
//     simultaneous initiation, settled by CollisionWinner; if ours wins
//     the incoming one is rejected and its base key remembered, else it
//     becomes the session and ours is archived (Receipt.Lost);
//     - otherwise (current answered, or started by the peer): the peer
//     started over, for example after losing its state; the new
//     initiation becomes the session and current is archived.
//
// Errors: ErrInvalidArgument (nil identity or prekeys), ErrWrongSession
// (not addressed to local, or current belongs to another pair), ErrNoInitiation
// (no session and no initiation header), and those of Decrypt and Respond.
func Receive(local Local, current *Session, env Envelope) (Receipt, error) {
	if local.Identity == nil || local.Prekeys == nil {
		return Receipt{}, fmt.Errorf("%w: nil identity or prekeys", ErrInvalidArgument)
	}
	if env.Recipient != local.Address || env.Sender == local.Address {
		return Receipt{}, fmt.Errorf("%w: envelope %s -> %s received by %s", ErrWrongSession, env.Sender, env.Recipient, local.Address)
	}
	if current != nil {
		if err := current.checkPair(env); err != nil {
			return Receipt{}, err
		}
	}
	ih := env.Initiation
	if ih == nil || (current != nil && current.answered(ih.Ephemeral)) {
		if current == nil {
			return Receipt{}, fmt.Errorf("session: receive from %s: %w", env.Sender, ErrNoInitiation)
		}
		next, pt, err := current.decrypted(env)
		if err != nil {
			return Receipt{}, err
		}
		return Receipt{Session: next, Plaintext: pt}, nil
	}
	if current != nil && slices.Contains(current.rejected, ih.Ephemeral) {
		id := ih.ID
		return Receipt{Rejected: &id}, nil
	}
	prekeys := local.Prekeys.clone()
	prekeys.Expire(local.Now)
	s, pt, err := Respond(local.Identity, local.Address, prekeys, env)
	if err != nil {
		return Receipt{}, err
	}
	initiator := s.remoteIdentity
	r := Receipt{Session: s, Plaintext: pt, Prekeys: prekeys, Initiator: &initiator}
	if current == nil {
		return r, nil
	}
	if current.initiator && current.initiating {
		if CollisionWinner(current.local, env.Sender) == current.local {
			c := current.clone()
			c.rejected = prepend(c.rejected, ih.Ephemeral, MaxRejectedInitiations)
			id := ih.ID
			return Receipt{Session: c, Rejected: &id, Initiator: &initiator}, nil
		}
		r.Lost = current.lost()
	}
	s.archivePrevious(current)
	return r, nil
}

// answered reports whether the current or an archived state of s is the
// responder's side of the initiation with base key ek.
func (s *Session) answered(ek [KeySize]byte) bool {
	if !s.initiator && s.init.Ephemeral == ek {
		return true
	}
	for _, a := range s.archive {
		if !a.initiator && a.init.Ephemeral == ek {
			return true
		}
	}
	return false
}

// archivePrevious makes prev's current state the newest archived state of
// s, followed by prev's archive, keeping at most MaxArchivedStates, and
// takes over prev's rejected base keys. States of another remote
// identity are dropped: they belong to a device the pin no longer trusts.
func (s *Session) archivePrevious(prev *Session) {
	head := prev.clone()
	head.archive, head.rejected = nil, nil
	states := append([]*Session{head}, prev.archive...)
	s.archive = nil
	for _, a := range states {
		if a.remoteIdentity == s.remoteIdentity && len(s.archive) < MaxArchivedStates {
			s.archive = append(s.archive, a)
		}
	}
	s.rejected = slices.Clone(prev.rejected)
}

// lost lists the envelopes s sent carrying its initiation header.
func (s *Session) lost() *LostInitiation {
	l := &LostInitiation{InitiationID: s.init.ID, Remote: s.remote}
	for n := range s.initSent {
		l.MessageNumbers = append(l.MessageNumbers, n)
	}
	return l
}

// ArchivedStates returns how many previous states the record keeps.
func (s *Session) ArchivedStates() int { return len(s.archive) }

// prepend puts k first in keys, keeping at most limit keys.
func prepend(keys [][KeySize]byte, k [KeySize]byte, limit int) [][KeySize]byte {
	out := append([][KeySize]byte{k}, keys...)
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}
