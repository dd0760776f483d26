package session

import (
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"

	"golang.org/x/crypto/curve25519"
)

// KeySize is the size in bytes of every public and private key of this
// package (Ed25519 public keys and seeds, X25519 keys).
const KeySize = 32

const (
	identityVersion       = 1
	publicIdentityVersion = 1
	fingerprintDomain     = "securemsg/session/v1 fingerprint\x00"
)

// PublicIdentity is the public half of a device identity: the Ed25519 key
// that signs prekeys and the X25519 key used in the X3DH agreement. It is
// comparable with ==; Equal compares in constant time.
type PublicIdentity struct {
	SigningKey [KeySize]byte // Ed25519 public key
	DHKey      [KeySize]byte // X25519 public key
}

// Equal reports whether p and o are the same identity.
func (p PublicIdentity) Equal(o PublicIdentity) bool {
	return subtle.ConstantTimeCompare(p.SigningKey[:], o.SigningKey[:])&
		subtle.ConstantTimeCompare(p.DHKey[:], o.DHKey[:]) == 1
}

// Fingerprint returns SHA-256 over a domain separator and both public keys:
// 32 bytes that users compare out of band to verify an identity.
func (p PublicIdentity) Fingerprint() []byte {
	h := sha256.New()
	h.Write([]byte(fingerprintDomain))
	h.Write(p.SigningKey[:])
	h.Write(p.DHKey[:])
	return h.Sum(nil)
}

// String returns the fingerprint in lowercase hex.
func (p PublicIdentity) String() string { return hex.EncodeToString(p.Fingerprint()) }

// MarshalBinary encodes the public identity as a version byte (1) followed
// by the Ed25519 and X25519 public keys (65 bytes).
func (p PublicIdentity) MarshalBinary() ([]byte, error) {
	w := writer{b: make([]byte, 0, 1+2*KeySize)}
	w.u8(publicIdentityVersion)
	w.identity(p)
	return w.b, nil
}

// Identity is a device's long-term private identity: an Ed25519 signing key
// pair and an X25519 Diffie-Hellman key pair. It never leaves the device
// except sealed by the caller (see MarshalBinary).
type Identity struct {
	signing ed25519.PrivateKey
	dhPriv  [KeySize]byte
	pub     PublicIdentity
}

// GenerateIdentity creates a new identity from rand (crypto/rand.Reader in
// production, also for nil; a deterministic reader in tests).
func GenerateIdentity(rand io.Reader) (*Identity, error) {
	rand, err := randSource(rand)
	if err != nil {
		return nil, err
	}
	var seed, dh [KeySize]byte
	if _, err := io.ReadFull(rand, seed[:]); err != nil {
		return nil, fmt.Errorf("session: generate identity: %w", err)
	}
	if _, err := io.ReadFull(rand, dh[:]); err != nil {
		return nil, fmt.Errorf("session: generate identity: %w", err)
	}
	return identityFromSecrets(seed, dh)
}

func identityFromSecrets(seed, dh [KeySize]byte) (*Identity, error) {
	id := &Identity{signing: ed25519.NewKeyFromSeed(seed[:]), dhPriv: dh}
	copy(id.pub.SigningKey[:], id.signing.Public().(ed25519.PublicKey))
	pub, err := x25519Public(dh)
	if err != nil {
		return nil, err
	}
	id.pub.DHKey = pub
	return id, nil
}

// Public returns the public half of the identity.
func (id *Identity) Public() PublicIdentity { return id.pub }

// MarshalBinary encodes the private identity as a version byte (1), the
// 32-byte Ed25519 seed and the 32-byte X25519 private key. The output is
// secret: seal it before storing it.
func (id *Identity) MarshalBinary() ([]byte, error) {
	w := writer{b: make([]byte, 0, 1+2*KeySize)}
	w.u8(identityVersion)
	w.raw(id.signing.Seed())
	w.key(id.dhPriv)
	return w.b, nil
}

// UnmarshalIdentity decodes the output of Identity.MarshalBinary. Invalid
// input returns an error wrapping ErrMalformedState.
func UnmarshalIdentity(b []byte) (*Identity, error) {
	r := reader{b: b}
	if v := r.u8(); r.err == nil && v != identityVersion {
		r.fail(fmt.Errorf("unknown version %d", v))
	}
	seed := r.key()
	dh := r.key()
	if err := r.finish(); err != nil {
		return nil, fmt.Errorf("%w: identity: %w", ErrMalformedState, err)
	}
	id, err := identityFromSecrets(seed, dh)
	if err != nil {
		return nil, fmt.Errorf("%w: identity: %w", ErrMalformedState, err)
	}
	return id, nil
}

// x25519Public derives the public key of an X25519 private key. It uses
// crypto/ecdh, whose fixed-base multiplication is about twice as fast as
// curve25519.X25519 with the base point (this runs on every session load).
func x25519Public(priv [KeySize]byte) ([KeySize]byte, error) {
	var pub [KeySize]byte
	k, err := ecdh.X25519().NewPrivateKey(priv[:])
	if err != nil {
		return pub, fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	copy(pub[:], k.PublicKey().Bytes())
	return pub, nil
}

// dh computes X25519(priv, pub); it fails (ErrInvalidKey) for low-order
// public keys, whose output would be all zeros.
func dh(priv, pub [KeySize]byte) ([]byte, error) {
	out, err := curve25519.X25519(priv[:], pub[:])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	return out, nil
}

// keyPair is an X25519 key pair.
type keyPair struct {
	priv, pub [KeySize]byte
}

func generateKeyPair(rand io.Reader) (keyPair, error) {
	var kp keyPair
	if _, err := io.ReadFull(rand, kp.priv[:]); err != nil {
		return keyPair{}, fmt.Errorf("session: generate key pair: %w", err)
	}
	pub, err := x25519Public(kp.priv)
	if err != nil {
		return keyPair{}, err
	}
	kp.pub = pub
	return kp, nil
}
