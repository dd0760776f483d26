package seal

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/securemsg/storage/internal/redact"
)

// String returns a redacted description of the key: its id (which every
// record it seals carries in clear), never its bytes.
func (k Key) String() string {
	if k.secret == nil {
		return "seal.Key(zero)"
	}
	return "seal.Key(id " + strconv.FormatUint(uint64(k.id), 10) + ", redacted)"
}

// GoString is what %#v prints: the redacted description, never the bytes.
func (k Key) GoString() string { return k.String() }

// Format prints the redacted description under every verb and flag
// (%v %+v %#v %s %q %x %X %d, widths): no verb reaches the bytes.
func (k Key) Format(f fmt.State, verb rune) { redact.Format(f, verb, k.String()) }

// LogValue makes slog log the redacted description.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.String()) }

// MarshalJSON returns an error wrapping ErrNotEncodable.
func (k Key) MarshalJSON() ([]byte, error) { return nil, errNotEncodable("Key") }

// MarshalText returns an error wrapping ErrNotEncodable.
func (k Key) MarshalText() ([]byte, error) { return nil, errNotEncodable("Key") }

// String returns a redacted description of the keyring: the id of the
// sealing key and of every key held, never their bytes.
func (kr *Keyring) String() string {
	if kr == nil {
		return "seal.Keyring(nil)"
	}
	var b strings.Builder
	b.WriteString("seal.Keyring(current ")
	b.WriteString(strconv.FormatUint(uint64(kr.Current()), 10))
	b.WriteString(", ids [")
	for i, id := range kr.KeyIDs() {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatUint(uint64(id), 10))
	}
	b.WriteString("], redacted)")
	return b.String()
}

// GoString is what %#v prints: the redacted description, never the bytes.
func (kr *Keyring) GoString() string { return kr.String() }

// Format prints the redacted description under every verb and flag.
func (kr *Keyring) Format(f fmt.State, verb rune) { redact.Format(f, verb, kr.String()) }

// LogValue makes slog log the redacted description.
func (kr *Keyring) LogValue() slog.Value { return slog.StringValue(kr.String()) }

// MarshalJSON returns an error wrapping ErrNotEncodable.
func (kr *Keyring) MarshalJSON() ([]byte, error) { return nil, errNotEncodable("Keyring") }

// MarshalText returns an error wrapping ErrNotEncodable.
func (kr *Keyring) MarshalText() ([]byte, error) { return nil, errNotEncodable("Keyring") }

func errNotEncodable(what string) error {
	return fmt.Errorf("seal: encode %s: %w: Key.Bytes is the one way to a key's bytes", what, ErrNotEncodable)
}
