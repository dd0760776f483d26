package seal

import (
	"errors"

	"github.com/securemsg/storage/internal/redact"
)

// Errors of this package, wrapped with context. Each failure has its own
// sentinel so that callers and tests can tell them apart with errors.Is.
var (
	// ErrTruncated means the value is shorter than a header, nonce and tag.
	ErrTruncated = errors.New("truncated sealed record")
	// ErrMalformed means the value does not start with the record magic.
	ErrMalformed = errors.New("not a sealed record")
	// ErrUnknownVersion means the format version is not one this code reads.
	ErrUnknownVersion = errors.New("unknown sealed record version")
	// ErrRecordType means the record holds another record type than asked.
	ErrRecordType = errors.New("wrong record type")
	// ErrWrongKey means the record was sealed with a key the keyring does
	// not hold (a wrong key, or one rotated away and forgotten).
	ErrWrongKey = errors.New("sealed with a key not in the keyring")
	// ErrAuthentication means the AEAD rejected the record: it was altered,
	// or moved to a row or table whose associated data differs.
	ErrAuthentication = errors.New("sealed record failed authentication")
	// ErrKey means a key is malformed or clashes with one already held.
	ErrKey = errors.New("invalid key")
	// ErrNotEncodable is what MarshalJSON and MarshalText of a Key or a
	// Keyring return, and what encoding/json and gob of every other type
	// holding secrets (a session.Identity, a store.LocalIdentity, ...)
	// fail with. A key is refused rather than encoded as a redacted value
	// so that an application saving its key through an encoder learns at
	// once that nothing usable was written; Key.Bytes is the one way to a
	// key's bytes, for the application's keystore.
	ErrNotEncodable = redact.ErrNotEncodable
)
