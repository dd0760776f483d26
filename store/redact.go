package store

// The types holding a sealed record's plaintext about keys and sessions
// (LocalIdentity, PeerState) never print it: every fmt verb and flag,
// slog's handlers and the encoders see a redacted description with each
// part's length; gob and encoding/json refuse them (wrapping
// seal.ErrNotEncodable). Their fields are the one way to the bytes.

import (
	"fmt"
	"log/slog"

	"github.com/securemsg/storage/internal/redact"
)

const howFields = "its fields are the one way to its bytes"

// String returns a redacted description: the address and the secret's
// length, never its bytes.
func (l LocalIdentity) String() string {
	return "store.LocalIdentity{Address: " + l.Address.String() + ", Secret: " + redact.Bytes(l.Secret) + "}"
}

// GoString is what %#v prints: the redacted description.
func (l LocalIdentity) GoString() string { return l.String() }

// Format prints the redacted description under every verb and flag
// (%v %+v %#v %s %q %x %X %d, widths).
func (l LocalIdentity) Format(f fmt.State, verb rune) { redact.Format(f, verb, l.String()) }

// LogValue makes slog log the redacted description.
func (l LocalIdentity) LogValue() slog.Value { return slog.StringValue(l.String()) }

// MarshalJSON returns an error wrapping seal.ErrNotEncodable.
func (l LocalIdentity) MarshalJSON() ([]byte, error) {
	return nil, redact.Refuse("store.LocalIdentity", howFields)
}

// GobEncode returns an error wrapping seal.ErrNotEncodable.
func (l LocalIdentity) GobEncode() ([]byte, error) {
	return nil, redact.Refuse("store.LocalIdentity", howFields)
}

// String returns a redacted description: each part's length (nil,
// empty, or its byte count), never its bytes.
func (p PeerState) String() string {
	return "store.PeerState{Session: " + redact.Bytes(p.Session) + ", Initiation: " + redact.Bytes(p.Initiation) +
		", Pin: " + redact.Bytes(p.Pin) + "}"
}

// GoString is what %#v prints: the redacted description.
func (p PeerState) GoString() string { return p.String() }

// Format prints the redacted description under every verb and flag.
func (p PeerState) Format(f fmt.State, verb rune) { redact.Format(f, verb, p.String()) }

// LogValue makes slog log the redacted description.
func (p PeerState) LogValue() slog.Value { return slog.StringValue(p.String()) }

// MarshalJSON returns an error wrapping seal.ErrNotEncodable.
func (p PeerState) MarshalJSON() ([]byte, error) {
	return nil, redact.Refuse("store.PeerState", howFields)
}

// GobEncode returns an error wrapping seal.ErrNotEncodable.
func (p PeerState) GobEncode() ([]byte, error) {
	return nil, redact.Refuse("store.PeerState", howFields)
}
