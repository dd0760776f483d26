package session

// The types holding private keys (Identity, Prekeys, Session) and a
// decrypted message (Receipt) never print them: every fmt verb and flag,
// slog's handlers and the encoders see a redacted description; gob and
// encoding/json refuse them (wrapping seal.ErrNotEncodable). Each type's
// MarshalBinary is the one way to its secret bytes, for the caller to
// seal.

import (
	"fmt"
	"log/slog"
	"strconv"

	"github.com/securemsg/storage/internal/redact"
)

const howIdentity = "MarshalBinary is the one way to its bytes, to seal"

// String returns a redacted description of the identity: its public
// fingerprint, never a private key.
func (id Identity) String() string {
	if id.signing == nil {
		return "session.Identity(zero)"
	}
	return "session.Identity(fingerprint " + id.pub.String() + ", redacted)"
}

// GoString is what %#v prints: the redacted description.
func (id Identity) GoString() string { return id.String() }

// Format prints the redacted description under every verb and flag
// (%v %+v %#v %s %q %x %X %d, widths).
func (id Identity) Format(f fmt.State, verb rune) { redact.Format(f, verb, id.String()) }

// LogValue makes slog log the redacted description.
func (id Identity) LogValue() slog.Value { return slog.StringValue(id.String()) }

// MarshalJSON returns an error wrapping seal.ErrNotEncodable.
func (id Identity) MarshalJSON() ([]byte, error) {
	return nil, redact.Refuse("session.Identity", howIdentity)
}

// GobEncode returns an error wrapping seal.ErrNotEncodable: gob would
// otherwise write MarshalBinary's private keys.
func (id Identity) GobEncode() ([]byte, error) {
	return nil, redact.Refuse("session.Identity", howIdentity)
}

// String returns a redacted description of the prekeys: the signed
// prekey's id and how many one-time prekeys are held, never a key.
func (p Prekeys) String() string {
	return "session.Prekeys(signed " + strconv.FormatUint(uint64(p.signedID), 10) +
		", " + strconv.Itoa(len(p.oneTime)) + " one-time, redacted)"
}

// GoString is what %#v prints: the redacted description.
func (p Prekeys) GoString() string { return p.String() }

// Format prints the redacted description under every verb and flag.
func (p Prekeys) Format(f fmt.State, verb rune) { redact.Format(f, verb, p.String()) }

// LogValue makes slog log the redacted description.
func (p Prekeys) LogValue() slog.Value { return slog.StringValue(p.String()) }

// MarshalJSON returns an error wrapping seal.ErrNotEncodable.
func (p Prekeys) MarshalJSON() ([]byte, error) {
	return nil, redact.Refuse("session.Prekeys", howIdentity)
}

// GobEncode returns an error wrapping seal.ErrNotEncodable.
func (p Prekeys) GobEncode() ([]byte, error) {
	return nil, redact.Refuse("session.Prekeys", howIdentity)
}

// String returns a redacted description of the session: its two
// devices, never a ratchet key.
func (s Session) String() string {
	return "session.Session(" + s.local.String() + " with " + s.remote.String() + ", redacted)"
}

// GoString is what %#v prints: the redacted description.
func (s Session) GoString() string { return s.String() }

// Format prints the redacted description under every verb and flag.
func (s Session) Format(f fmt.State, verb rune) { redact.Format(f, verb, s.String()) }

// LogValue makes slog log the redacted description.
func (s Session) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON returns an error wrapping seal.ErrNotEncodable.
func (s Session) MarshalJSON() ([]byte, error) {
	return nil, redact.Refuse("session.Session", howIdentity)
}

// GobEncode returns an error wrapping seal.ErrNotEncodable.
func (s Session) GobEncode() ([]byte, error) {
	return nil, redact.Refuse("session.Session", howIdentity)
}

// String returns a redacted description of the receipt: what it holds,
// never the plaintext or a key.
func (r Receipt) String() string {
	return fmt.Sprintf("session.Receipt{Session: %v, Plaintext: %s, Prekeys: %v, Initiator: %v, Rejected: %v, Lost: %+v}",
		r.Session, redact.Bytes(r.Plaintext), r.Prekeys, r.Initiator, r.Rejected, r.Lost)
}

// GoString is what %#v prints: the redacted description.
func (r Receipt) GoString() string { return r.String() }

// Format prints the redacted description under every verb and flag.
func (r Receipt) Format(f fmt.State, verb rune) { redact.Format(f, verb, r.String()) }

// LogValue makes slog log the redacted description.
func (r Receipt) LogValue() slog.Value { return slog.StringValue(r.String()) }

// MarshalJSON returns an error wrapping seal.ErrNotEncodable.
func (r Receipt) MarshalJSON() ([]byte, error) {
	return nil, redact.Refuse("session.Receipt", "copy the fields to encode")
}

// GobEncode returns an error wrapping seal.ErrNotEncodable.
func (r Receipt) GobEncode() ([]byte, error) {
	return nil, redact.Refuse("session.Receipt", "copy the fields to encode")
}
