package session

import (
	"fmt"
	"slices"
	"time"

	"github.com/securemsg/storage/store"
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
	// MaxRetiredInitiations is how many base keys of answered
	// initiations whose states were dropped a record remembers (all the
	// states of a full record, current and archived), so that a replay of
	// one fails with ErrReplay instead of being taken for a new
	// initiation: after Retire (an accepted identity change), for states
	// of a remote identity no longer trusted, and beyond MaxArchivedStates.
	MaxRetiredInitiations = MaxArchivedStates + 1
)

// Local is the receiving device: what Receive needs to answer an
// initiation.
type Local struct {
	Identity *Identity
	Address  store.DeviceAddress
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
	// collision (see CollisionWinner), or nil.
	Lost *LostInitiation
}

// Receive decides what an envelope from a remote device does to the
// session record current, held for it (nil if none), and decrypts it. It
// is the receiving rule of the client, and changes nothing it is given:
//
//  1. No initiation header: current (or one of its archived states)
//     decrypts it; nothing else may. The one state that tries it is
//     chosen from the ratchet header (see the package documentation,
//     Receiving).
//  2. An initiation whose base key (ephemeral key) is that of the current
//     or an archived state this device answered is routed to that state:
//     a late message decrypts, a replay fails with ErrReplay. It never
//     builds a new session.
//  3. An initiation whose base key the record retired (answered by a
//     state it no longer holds, see Session.Retire) fails with ErrReplay.
//     A copy of an initiation rejected before by the collision rule is
//     authenticated as in 4, then rejected again (Receipt.Rejected,
//     Session and Initiator nil): a forged copy fails with ErrDecrypt,
//     and a copy whose prekey is gone since (a consumed one-time prekey,
//     an expired signed prekey) with ErrUnknownPrekey.
//  4. Any other initiation is authenticated first, on a copy of the
//     prekeys: X3DH and the decryption of its message must succeed
//     (otherwise its error is returned, e.g. ErrDecrypt for a forgery,
//     ErrUnknownPrekey for a consumed one-time prekey or an expired signed
//     prekey). Then:
//     - no current session (nil, or a record without state): it becomes
//     the session, keeping the record's remembered base keys;
//     - current is this device's own initiation, still unanswered: a
//     simultaneous initiation, settled by CollisionWinner; if ours wins
//     the incoming one is rejected and its base key remembered, else it
//     becomes the session and ours is archived (Receipt.Lost);
//     - otherwise (current answered, or started by the peer): the peer
//     started over, for example after losing its state; the new
//     initiation becomes the session and current is archived (states of
//     another remote identity are dropped, their base keys retired).
//
// Errors: store.ErrInvalidArgument (nil identity or prekeys), ErrWrongSession
// (not addressed to local, or current belongs to another pair), ErrNoInitiation
// (no session, or no current state, and no initiation header), ErrReplay,
// ErrDecrypt (tampered or forged), ErrTooManySkipped (more than MaxSkip
// messages skipped in a chain), and those of Respond.
func Receive(local Local, current *Session, env Envelope) (Receipt, error) {
	r, err := receive(local, current, env)
	if err != nil {
		return Receipt{}, fmt.Errorf("session: receive from %s: %w", env.Sender, err)
	}
	return r, nil
}

// receive is Receive, its errors not yet in the call's context.
func receive(local Local, current *Session, env Envelope) (Receipt, error) {
	if local.Identity == nil || local.Prekeys == nil {
		return Receipt{}, fmt.Errorf("%w: nil identity or prekeys", store.ErrInvalidArgument)
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
		if current == nil || current.stateless {
			return Receipt{}, ErrNoInitiation
		}
		next, pt, err := current.decrypted(env)
		if err != nil {
			return Receipt{}, err
		}
		return Receipt{Session: next, Plaintext: pt}, nil
	}
	if current != nil && slices.Contains(current.retired, ih.Ephemeral) {
		return Receipt{}, fmt.Errorf("%w: initiation %s was answered by a state no longer held", ErrReplay, ih.ID)
	}
	prekeys := local.Prekeys.clone()
	prekeys.Expire(local.Now)
	s, pt, err := respond(local.Identity, local.Address, prekeys, env)
	if err != nil {
		return Receipt{}, err
	}
	if current != nil && slices.Contains(current.rejected, ih.Ephemeral) {
		// Authenticated as its first copy was, so that a forged copy
		// fails as any forgery does instead of passing for a rejection.
		id := ih.ID
		return Receipt{Rejected: &id}, nil
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
	if !s.stateless && !s.initiator && s.init.Ephemeral == ek {
		return true
	}
	for _, a := range s.archive {
		if !a.initiator && a.init.Ephemeral == ek {
			return true
		}
	}
	return false
}

// archivePrevious makes prev's current state (if any) the newest archived
// state of s, followed by prev's archive, keeping at most
// MaxArchivedStates, and takes over prev's remembered base keys. States of
// another remote identity are dropped (they belong to a device the pin no
// longer trusts), as are those beyond the bound; the base keys of the
// dropped ones this device answered are remembered in s.retired, so that a
// replay of their initiation is still recognised.
func (s *Session) archivePrevious(prev *Session) {
	var states []*Session
	if !prev.stateless {
		head := prev.clone()
		head.archive, head.rejected, head.retired = nil, nil, nil
		states = append(states, head)
	}
	states = append(states, prev.archive...)
	s.archive = nil
	var dropped [][KeySize]byte
	for _, a := range states {
		switch {
		case !s.stateless && a.remoteIdentity == s.remoteIdentity && len(s.archive) < MaxArchivedStates:
			s.archive = append(s.archive, a)
		case !a.initiator:
			dropped = append(dropped, a.init.Ephemeral)
		}
	}
	s.boundArchivedSkipped()
	s.rejected = slices.Clone(prev.rejected)
	s.retired = retire(dropped, prev.retired)
}

// retire returns the retired base keys after dropped (newest first) join
// the ones remembered already, keeping the newest MaxRetiredInitiations.
func retire(dropped, remembered [][KeySize]byte) [][KeySize]byte {
	out := append(dropped, remembered...)
	if len(out) > MaxRetiredInitiations {
		out = out[:MaxRetiredInitiations]
	}
	return out
}

// Retire returns a record for s's device without a current state: it
// keeps none of s's states, only the base keys of the initiations s's
// record answered (current and archived states, and those it already
// remembered; newest first, at most MaxRetiredInitiations) and of those it
// rejected. A copy of one of those initiations received on the retired
// record fails with ErrReplay (or is rejected again) instead of being
// taken for a new initiation. This is what to keep when the sessions with
// a device must go but replays of its initiations must still be
// recognised, as after an accepted identity change. Encrypt on it
// returns ErrNoState; Receive accepts a new initiation on it, and
// Supersede puts a new session of this device's own on it. s is unchanged.
func (s *Session) Retire() *Session {
	r := &Session{local: s.local, remote: s.remote, stateless: true, rand: s.rand}
	r.archivePrevious(s)
	return r
}

// Supersede makes s, a new session started with Initiate, the successor
// of prev, the record held so far for the same device: prev's states of
// the same remote identity are archived under s (late messages of them
// still decrypt), the others dropped, and the base keys prev remembers,
// with those of the dropped states it answered, are kept, so replays of
// their initiations are still recognised. Call it before s is first
// stored. prev is unchanged. Returns store.ErrInvalidArgument if prev is nil, s
// has no state, or s already holds archived states or remembered
// initiations (it is not new); ErrWrongSession if prev is for another pair
// of devices.
func (s *Session) Supersede(prev *Session) error {
	if prev == nil || s.stateless {
		return fmt.Errorf("%w: supersede: nil record or no current state", store.ErrInvalidArgument)
	}
	// Only a new session has nothing of its own to lose: taking prev's
	// archive and remembered keys over would drop what s holds.
	if len(s.archive) > 0 || len(s.rejected) > 0 || len(s.retired) > 0 {
		return fmt.Errorf("%w: supersede: the session already holds archived states or remembered initiations", store.ErrInvalidArgument)
	}
	if prev.local != s.local || prev.remote != s.remote {
		return fmt.Errorf("%w: supersede %s -> %s with %s -> %s", ErrWrongSession, prev.local, prev.remote, s.local, s.remote)
	}
	s.archivePrevious(prev)
	return nil
}

// Trusting returns s without the states of any remote identity but
// trusted (the identity the device's pin trusts): if the current state is
// of another identity the record is retired (Retire), and archived states
// of another identity are dropped; the base keys of the dropped states
// this device answered are remembered, so a replay of their initiations
// fails with ErrReplay. A record whose states are all of trusted is
// returned as it is. s is unchanged.
//
// Every state a client builds is of the identity its pin trusts, so a
// state of another identity can only come from a stored record put back
// from before an accepted identity change: without this check the client
// would encrypt to, and accept messages from, the identity it no longer
// trusts.
func (s *Session) Trusting(trusted PublicIdentity) *Session {
	foreign := func(a *Session) bool { return a.remoteIdentity != trusted }
	if !s.stateless && foreign(s) {
		return s.Retire()
	}
	if !slices.ContainsFunc(s.archive, foreign) {
		return s
	}
	c := s.clone()
	c.archive = c.archive[:0]
	var dropped [][KeySize]byte
	for _, a := range s.archive {
		switch {
		case !foreign(a):
			c.archive = append(c.archive, a)
		case !a.initiator:
			dropped = append(dropped, a.init.Ephemeral)
		}
	}
	c.retired = retire(dropped, s.retired)
	return c
}

// HasState reports whether the record has a current state to encrypt
// with; false after Retire, until a new session supersedes it. Without a
// state, only Local and Remote say something: the identities and the
// initiation id are zero, and Initiating is false.
func (s *Session) HasState() bool { return !s.stateless }

// lost lists the envelopes s sent carrying its initiation header.
func (s *Session) lost() *LostInitiation {
	l := &LostInitiation{InitiationID: s.init.ID, Remote: s.remote}
	for n := range s.initSent {
		l.MessageNumbers = append(l.MessageNumbers, n)
	}
	return l
}

// prepend puts k first in keys, keeping at most limit keys.
func prepend(keys [][KeySize]byte, k [KeySize]byte, limit int) [][KeySize]byte {
	out := append([][KeySize]byte{k}, keys...)
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}
