package session

import "errors"

// Sentinel errors. Functions of this package wrap them with context; test
// them with errors.Is.
var (
	// ErrBadSignature is returned when a bundle's signed prekey signature
	// does not verify under the bundle's identity key.
	ErrBadSignature = errors.New("bad signed prekey signature")
	// ErrInvalidBundle is returned for a structurally invalid bundle
	// (bad address, duplicate one-time prekey ids, too many prekeys).
	ErrInvalidBundle = errors.New("invalid bundle")
	// ErrInvalidKey is returned when a Diffie-Hellman computation fails
	// (low-order or otherwise invalid X25519 public key).
	ErrInvalidKey = errors.New("invalid public key")
	// ErrMalformedEnvelope is returned when envelope bytes are truncated,
	// oversized, carry trailing data, an unknown version or flag, or an
	// invalid field.
	ErrMalformedEnvelope = errors.New("malformed envelope")
	// ErrMalformedState is returned when serialized private state (identity,
	// prekeys, session, pin) is truncated, has an unknown version or is
	// otherwise invalid.
	ErrMalformedState = errors.New("malformed serialized state")
	// ErrMessageTooLarge is returned by Encrypt for a plaintext longer than
	// MaxPlaintextSize.
	ErrMessageTooLarge = errors.New("plaintext too large")
	// ErrDecrypt is returned when an envelope does not authenticate under
	// the session (tampered, forged, or encrypted under another state).
	ErrDecrypt = errors.New("decryption failed")
	// ErrReplay is returned when an envelope's message key was already used
	// (a duplicate delivery) or has been evicted from the skipped-key store.
	ErrReplay = errors.New("message already received")
	// ErrTooManySkipped is returned when accepting an envelope would require
	// skipping more than MaxSkip message keys in one chain.
	ErrTooManySkipped = errors.New("too many skipped messages")
	// ErrWrongSession is returned when an envelope's sender, recipient or
	// initiation does not belong to the session it is given to.
	ErrWrongSession = errors.New("envelope does not belong to this session")
	// ErrNoInitiation is returned by Respond for an envelope without an
	// initiation header, and by Receive for one without a session.
	ErrNoInitiation = errors.New("envelope carries no initiation header")
	// ErrUnknownPrekey is returned by Respond when the initiation names a
	// signed prekey or one-time prekey the responder does not hold (for a
	// one-time prekey: never issued or already consumed).
	ErrUnknownPrekey = errors.New("unknown or consumed prekey")
	// ErrChainExhausted is returned by Encrypt when a sending chain reached
	// its maximum message number.
	ErrChainExhausted = errors.New("sending chain exhausted")
	// ErrIdentityChanged is returned by Pin.Check when a device presents an
	// identity other than the pinned one. The error is an
	// *IdentityChangedError carrying both identities.
	ErrIdentityChanged = errors.New("remote identity changed")
	// ErrNoIdentityChange is returned by Pin.Accept when there is no pending
	// identity change to accept.
	ErrNoIdentityChange = errors.New("no identity change to accept")
	// ErrNoState is returned by Encrypt on a record without a current
	// state (see Session.Retire): start a new session with
	// Initiate and Supersede, or wait for the peer's initiation.
	ErrNoState = errors.New("record has no current state")
)

// errShort and errTrailing are the internal decoding failures; the public
// decoders wrap them with their own sentinel (ErrMalformedEnvelope,
// ErrMalformedState).
var (
	errShort    = errors.New("truncated input")
	errTrailing = errors.New("trailing data")
)
