package session

import (
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/securemsg/storage/store"
)

// Envelope size limits.
const (
	// MaxEnvelopeSize is the largest encoded envelope accepted by
	// UnmarshalEnvelope and produced by Encrypt (64 KiB).
	MaxEnvelopeSize = 64 << 10
	// MaxPlaintextSize is the largest plaintext Encrypt accepts. It leaves
	// 1 KiB for the largest possible header (two 256-byte user ids, an
	// initiation header and the nonce: 754 bytes) and the 16-byte
	// authentication tag. A client's message is smaller: the client
	// frames it, and store.MaxPlaintextSize is the largest it sends.
	MaxPlaintextSize = MaxEnvelopeSize - 1024
	// EnvelopeVersion is the version byte of the envelope format: 2, the
	// format that carries a random nonce. Version 1 envelopes, whose nonce
	// was derived from the message key, are refused (see
	// UnmarshalEnvelope).
	EnvelopeVersion = 2
	// NonceSize is the size of the random XChaCha20-Poly1305 nonce an
	// envelope carries.
	NonceSize = 24
)

// envelopeVersion1 is the refused format whose AEAD nonce was derived from
// the message key alongside the AEAD key: a message key used twice (a
// session state put back, two clients on one state) repeated the key and
// the nonce, hence the keystream.
const envelopeVersion1 = 1

const (
	flagInitiation    = 1 << 0
	flagOneTimePrekey = 1 << 1
	knownFlags        = flagInitiation | flagOneTimePrekey
	aeadOverhead      = 16
)

// InitiationID identifies one X3DH initiation (and the session it starts).
type InitiationID [16]byte

// String returns the id in lowercase hex.
func (i InitiationID) String() string { return hex.EncodeToString(i[:]) }

// InitiationHeader is carried by every envelope an initiator sends until it
// has received a reply, so the responder can complete the X3DH agreement
// from whichever of them arrives first.
type InitiationHeader struct {
	ID               InitiationID
	Identity         PublicIdentity // the initiator's identity
	Ephemeral        [KeySize]byte  // the initiator's ephemeral X25519 key
	SignedPrekeyID   uint32         // the responder's signed prekey used
	HasOneTimePrekey bool           // whether a one-time prekey was used
	OneTimePrekeyID  uint32         // meaningful only if HasOneTimePrekey
}

// RatchetHeader is the Double Ratchet message header: the sender's current
// ratchet public key, the receiver's ratchet public key that the sender's
// current sending chain answers, the length of its previous sending chain
// and the message number in the current chain.
type RatchetHeader struct {
	DH [KeySize]byte
	// Answers is the receiver's ratchet public key of the key agreement
	// that started the sender's current sending chain: the last ratchet
	// key the sender received, or, on the first chain of an initiator,
	// the receiver's signed prekey named by the initiation header. It
	// tells the receiver which one of its states can take a ratchet key
	// none of them has seen yet (see the package documentation,
	// Receiving).
	Answers [KeySize]byte
	PN      uint32
	N       uint32
}

// Envelope is one encrypted message between two devices. Everything except
// the ciphertext travels in clear and is authenticated as associated data.
type Envelope struct {
	Sender     store.DeviceAddress
	Recipient  store.DeviceAddress
	Initiation *InitiationHeader // nil once the session is confirmed
	Header     RatchetHeader
	// Nonce is the XChaCha20-Poly1305 nonce, drawn at random by every
	// Encrypt: two encryptions never share key and nonce, even under one
	// message key (a session state used twice).
	Nonce      [NonceSize]byte
	Ciphertext []byte // AEAD ciphertext including the 16-byte tag
}

// Clone returns a deep copy of the envelope.
func (e Envelope) Clone() Envelope {
	if e.Initiation != nil {
		ih := *e.Initiation
		e.Initiation = &ih
	}
	e.Ciphertext = slices.Clone(e.Ciphertext)
	return e
}

// appendHeader writes everything but the ciphertext length and ciphertext:
// the bytes that are authenticated as associated data.
func (e *Envelope) appendHeader(w *writer) {
	flags := byte(0)
	if e.Initiation != nil {
		flags |= flagInitiation
		if e.Initiation.HasOneTimePrekey {
			flags |= flagOneTimePrekey
		}
	}
	w.u8(EnvelopeVersion)
	w.u8(flags)
	w.address(e.Sender)
	w.address(e.Recipient)
	if ih := e.Initiation; ih != nil {
		w.raw(ih.ID[:])
		w.identity(ih.Identity)
		w.key(ih.Ephemeral)
		w.u32(ih.SignedPrekeyID)
		if ih.HasOneTimePrekey {
			w.u32(ih.OneTimePrekeyID)
		}
	}
	w.key(e.Header.DH)
	w.key(e.Header.Answers)
	w.u32(e.Header.PN)
	w.u32(e.Header.N)
	w.raw(e.Nonce[:])
}

func (e *Envelope) validate() error {
	if err := e.Sender.Validate(); err != nil {
		return fmt.Errorf("sender: %w", err)
	}
	if err := e.Recipient.Validate(); err != nil {
		return fmt.Errorf("recipient: %w", err)
	}
	if e.Sender == e.Recipient {
		return fmt.Errorf("sender and recipient are both %s", e.Sender)
	}
	if len(e.Ciphertext) < aeadOverhead {
		return fmt.Errorf("ciphertext of %d bytes is shorter than the tag", len(e.Ciphertext))
	}
	return nil
}

// MarshalBinary encodes the envelope in the layout documented in the
// package documentation. An invalid envelope (bad address, short
// ciphertext, encoding above MaxEnvelopeSize) returns an error wrapping
// ErrMalformedEnvelope.
func (e Envelope) MarshalBinary() ([]byte, error) {
	if err := e.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedEnvelope, err)
	}
	w := writer{b: make([]byte, 0, 256+len(e.Ciphertext))}
	e.appendHeader(&w)
	w.u32(uint32(len(e.Ciphertext)))
	w.raw(e.Ciphertext)
	if len(w.b) > MaxEnvelopeSize {
		return nil, fmt.Errorf("%w: %d bytes exceeds MaxEnvelopeSize %d", ErrMalformedEnvelope, len(w.b), MaxEnvelopeSize)
	}
	return w.b, nil
}

// UnmarshalEnvelope decodes an envelope. Truncated, oversized (above
// MaxEnvelopeSize), trailing or otherwise malformed input returns an error
// wrapping ErrMalformedEnvelope; it never panics. The ciphertext is copied.
// Decoding checks structure only: authenticity is checked by Receive and
// Respond. A version 1 envelope (nonce derived from the message key) is
// refused with ErrMalformedEnvelope, also for decryption: nothing stores
// envelopes (a pending message is kept as plaintext and encrypted again by
// every retry), so an upgraded sender's retry replaces it, and accepting
// it would keep a format alive whose every reused message key repeats the
// keystream.
func UnmarshalEnvelope(b []byte) (Envelope, error) {
	e, err := unmarshalEnvelope(b)
	if err != nil {
		return Envelope{}, fmt.Errorf("%w: %w", ErrMalformedEnvelope, err)
	}
	return e, nil
}

func unmarshalEnvelope(b []byte) (Envelope, error) {
	if len(b) > MaxEnvelopeSize {
		return Envelope{}, fmt.Errorf("%d bytes exceeds MaxEnvelopeSize %d", len(b), MaxEnvelopeSize)
	}
	r := reader{b: b}
	switch v := r.u8(); {
	case r.err != nil:
	case v == envelopeVersion1:
		return Envelope{}, fmt.Errorf("version 1 is refused (its nonce is derived from the message key): the sender must upgrade to version %d", EnvelopeVersion)
	case v != EnvelopeVersion:
		return Envelope{}, fmt.Errorf("unknown version %d", v)
	}
	flags := r.u8()
	if r.err == nil {
		if flags&^knownFlags != 0 {
			return Envelope{}, fmt.Errorf("unknown flags %#02x", flags)
		}
		if flags&flagOneTimePrekey != 0 && flags&flagInitiation == 0 {
			return Envelope{}, fmt.Errorf("one-time prekey flag without initiation")
		}
	}
	var e Envelope
	e.Sender = r.address()
	e.Recipient = r.address()
	if flags&flagInitiation != 0 {
		ih := &InitiationHeader{}
		copy(ih.ID[:], r.take(len(ih.ID)))
		ih.Identity = r.identity()
		ih.Ephemeral = r.key()
		ih.SignedPrekeyID = r.u32()
		if flags&flagOneTimePrekey != 0 {
			ih.HasOneTimePrekey = true
			ih.OneTimePrekeyID = r.u32()
		}
		e.Initiation = ih
	}
	e.Header.DH = r.key()
	e.Header.Answers = r.key()
	e.Header.PN = r.u32()
	e.Header.N = r.u32()
	copy(e.Nonce[:], r.take(NonceSize))
	n := r.u32()
	e.Ciphertext = slices.Clone(r.take(int(n)))
	if err := r.finish(); err != nil {
		return Envelope{}, err
	}
	if err := e.validate(); err != nil {
		return Envelope{}, err
	}
	return e, nil
}
