package memstore

import (
	"fmt"
	"log/slog"

	"github.com/securemsg/storage/internal/redact"
)

// String returns a description of the store that shows none of what it
// holds (sealed values in store.PeerState fields, which fmt would
// otherwise walk).
func (s *Store) String() string {
	if s == nil {
		return "memstore.Store(nil)"
	}
	return "memstore.Store(redacted)"
}

// GoString is what %#v prints: the redacted description.
func (s *Store) GoString() string { return s.String() }

// Format prints the redacted description under every verb and flag.
func (s *Store) Format(f fmt.State, verb rune) { redact.Format(f, verb, s.String()) }

// LogValue makes slog log the redacted description.
func (s *Store) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON returns an error wrapping seal.ErrNotEncodable.
func (s *Store) MarshalJSON() ([]byte, error) {
	return nil, redact.Refuse("memstore.Store", "it is no value to encode")
}

// GobEncode returns an error wrapping seal.ErrNotEncodable.
func (s *Store) GobEncode() ([]byte, error) {
	return nil, redact.Refuse("memstore.Store", "it is no value to encode")
}
