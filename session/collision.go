package session

import (
	"fmt"

	"github.com/securemsg/storage/ids"
)

// CollisionWinner returns which of two initiators' initiations wins a
// simultaneous initiation: the one whose initiator address is smaller by
// ids.DeviceAddress.Less. Both devices apply the same rule to the same
// pair of addresses, so they agree; a tie is impossible because the two
// initiators of a collision are different devices.
func CollisionWinner(a, b ids.DeviceAddress) ids.DeviceAddress {
	if b.Less(a) {
		return b
	}
	return a
}

// Outcome says which initiation won a collision.
type Outcome int

// Outcomes of ResolveCollision.
const (
	// OursWon: the local session's initiation wins; the incoming initiation
	// is rejected (nothing is decrypted, no prekey is consumed). Its sender
	// will re-send those messages on the winning session.
	OursWon Outcome = iota + 1
	// TheirsWon: the incoming initiation wins; the local session must be
	// replaced by Resolution.Winner and the messages listed in
	// Resolution.Lost re-sent on it.
	TheirsWon
)

// String returns "ours-won" or "theirs-won".
func (o Outcome) String() string {
	switch o {
	case OursWon:
		return "ours-won"
	case TheirsWon:
		return "theirs-won"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// LostInitiation describes the envelopes this device sent on an initiation
// that lost a collision: they will never be decrypted by the peer and must
// be re-sent on the winning session (the client keeps them pending until
// acknowledged, so a retry after convergence does exactly that).
type LostInitiation struct {
	InitiationID InitiationID
	Remote       ids.DeviceAddress
	// MessageNumbers are the ratchet message numbers (RatchetHeader.N) of
	// the envelopes sent carrying the lost initiation header, ascending.
	MessageNumbers []uint32
}

// Resolution is the result of ResolveCollision.
type Resolution struct {
	Outcome Outcome
	// Winner is the session to keep: ours (OursWon) or the new responder
	// session built from the incoming initiation (TheirsWon).
	Winner *Session
	// Plaintext is the decrypted incoming message (TheirsWon only).
	Plaintext []byte
	// Lost lists what was sent on our losing initiation (TheirsWon only).
	Lost *LostInitiation
	// Rejected is the incoming initiation's id (OursWon only).
	Rejected InitiationID
}

// ResolveCollision settles a simultaneous initiation. Call it when the
// client holds a session ours with a peer and receives from that peer an
// envelope carrying an initiation header with another InitiationID (Decrypt
// reports ErrWrongSession for it).
//
// Rule: of the two initiations, the one whose initiator address is smaller
// (CollisionWinner) wins, on both devices, whatever was delivered first.
// The rule applies only between initiations started by the two different
// devices: if ours was itself started by the peer (we are its responder),
// the incoming envelope is a re-initiation, not a collision, and
// ResolveCollision returns ErrNotColliding (the client decides, e.g. after
// an accepted identity change, to Respond and replace the session).
//
//   - ours wins: Resolution{Outcome: OursWon, Winner: ours, Rejected: id};
//     ours and prekeys are untouched. Every later envelope of the rejected
//     initiation gets the same answer, so late copies can be dropped.
//   - theirs wins: Respond is run on incoming with local and prekeys (a
//     one-time prekey is consumed); Resolution{Outcome: TheirsWon, Winner:
//     the new session, Plaintext, Lost: our envelopes to re-send}. ours is
//     left unchanged and must be discarded by the caller. If Respond fails,
//     its error is returned and nothing changes.
//
// The rule depends neither on delivery order nor on whether ours has been
// confirmed, so a stale envelope of a losing initiation that arrives after
// convergence is rejected too. ResolveCollision is the rule alone: the
// client uses Receive, which applies it only while ours is unanswered,
// remembers the rejected initiations, and accepts an authenticated new
// initiation after ours was answered (the peer started over).
//
// Afterwards both devices hold one session of the winning initiation: the
// winner's initiator keeps sending the initiation header until the loser's
// first envelope on it (typically a re-sent message) arrives.
func ResolveCollision(local *Identity, prekeys *Prekeys, ours *Session, incoming Envelope) (Resolution, error) {
	if ours == nil {
		return Resolution{}, fmt.Errorf("%w: nil session", ErrInvalidArgument)
	}
	ih := incoming.Initiation
	if ih == nil {
		return Resolution{}, fmt.Errorf("session: resolve collision: %w", ErrNoInitiation)
	}
	if err := ours.checkPair(incoming); err != nil {
		return Resolution{}, err
	}
	switch {
	case ih.ID == ours.init.ID:
		return Resolution{}, fmt.Errorf("%w: initiation %s is the session's own, decrypt it", ErrNotColliding, ih.ID)
	case !ours.initiator:
		return Resolution{}, fmt.Errorf("%w: %s re-initiated a session it had started", ErrNotColliding, incoming.Sender)
	}
	// ours was initiated by ours.local, the incoming one by incoming.Sender.
	if CollisionWinner(ours.local, incoming.Sender) == ours.local {
		return Resolution{Outcome: OursWon, Winner: ours, Rejected: ih.ID}, nil
	}
	winner, pt, err := Respond(local, ours.local, prekeys, incoming)
	if err != nil {
		return Resolution{}, fmt.Errorf("session: resolve collision with %s: %w", incoming.Sender, err)
	}
	return Resolution{Outcome: TheirsWon, Winner: winner, Plaintext: pt, Lost: ours.lost()}, nil
}
