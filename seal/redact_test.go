package seal_test

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/testkit/leakcheck"
	"github.com/securemsg/storage/seal"
)

// redactKeys returns two keys whose bytes are fixed (so the 4-byte hex
// runs that leakcheck.Encodings looks for are known not to occur in any
// redacted text, which names only decimal ids) and a keyring of both.
func redactKeys(t *testing.T) (seal.Key, seal.Key, *seal.Keyring) {
	t.Helper()
	s1 := sha256.Sum256([]byte("redaction test key 1"))
	s2 := sha256.Sum256([]byte("redaction test key 2"))
	k1, err := seal.NewKey(s1[:])
	require.NoError(t, err)
	k2, err := seal.NewKey(s2[:])
	require.NoError(t, err)
	kr, err := seal.NewKeyring(k2, k1)
	require.NoError(t, err)
	return k1, k2, kr
}

// Every fmt verb, with and without flags and widths, prints a Key and a
// *Keyring redacted, on its own and inside the values an application
// prints (pointers, slices, maps, structs with exported and unexported
// fields, errors); Bytes still returns the bytes.
func TestKeysNeverPrint(t *testing.T) {
	k1, k2, kr := redactKeys(t)
	secrets := [][]byte{k1.Bytes(), k2.Bytes()}
	require.Len(t, k1.Bytes(), seal.KeySize)

	type exported struct {
		K  seal.Key
		KR *seal.Keyring
	}
	type unexported struct {
		k  seal.Key
		kr *seal.Keyring
	}
	values := map[string]any{
		"key":                k1,
		"pointer to key":     &k1,
		"keyring":            kr,
		"slice of keys":      []seal.Key{k1, k2},
		"array of keys":      [2]seal.Key{k1, k2},
		"map of keys":        map[string]seal.Key{"a": k1},
		"exported fields":    exported{k1, kr},
		"unexported fields":  unexported{k1, kr},
		"pointer to struct":  &unexported{k2, kr},
		"error wrapping key": fmt.Errorf("open: %v", k1),
		"zero key":           seal.Key{},
	}
	// %p too: fmt prints a value (not a pointer) by reflection under it,
	// which a Key resists by holding its bytes behind an untyped pointer.
	verbs := append([]string{"%p"}, leakcheck.Verbs...)
	for name, v := range values {
		t.Run(name, func(t *testing.T) {
			for _, verb := range verbs {
				leakcheck.RequireNoLeak(t, fmt.Sprintf(verb, v), secrets...)
			}
			leakcheck.RequireNoLeak(t, fmt.Sprint(v), secrets...)
			leakcheck.RequireNoLeak(t, fmt.Sprintln(v, v), secrets...)
		})
	}

	// The redacted text says what the value is, so a test printing
	// nothing at all could not pass; widths and %q still apply.
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%d"} {
		require.Equal(t, k1.String(), fmt.Sprintf(verb, k1), verb)
		require.Equal(t, kr.String(), fmt.Sprintf(verb, kr), verb)
	}
	require.Contains(t, k1.String(), "redacted")
	require.Contains(t, k1.String(), strconv.FormatUint(uint64(k1.ID()), 10), "the id is not secret: every record carries it")
	require.Contains(t, kr.String(), strconv.FormatUint(uint64(k2.ID()), 10))
	require.Equal(t, strconv.Quote(k1.String()), fmt.Sprintf("%q", k1))
	require.Equal(t, strings.Repeat(" ", 80-len(k1.String()))+k1.String(), fmt.Sprintf("%80x", k1))
	require.Equal(t, k1.String()+strings.Repeat(" ", 80-len(k1.String())), fmt.Sprintf("%-80v", k1))
	require.Equal(t, k1.String(), k1.GoString())
	require.Equal(t, "seal.Keyring(nil)", fmt.Sprint((*seal.Keyring)(nil)))
	require.Equal(t, "seal.Key(zero)", fmt.Sprint(seal.Key{}))

	require.Equal(t, secrets[0], k1.Bytes(), "Bytes is the one way to the bytes")
}

// Both slog handlers log a Key and a *Keyring redacted, as attributes, in
// groups, in handler attributes and inside values slog encodes itself.
func TestKeysNeverLog(t *testing.T) {
	k1, k2, kr := redactKeys(t)
	secrets := [][]byte{k1.Bytes(), k2.Bytes()}
	handlers := map[string]func(*bytes.Buffer) slog.Handler{
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	}
	for name, newHandler := range handlers {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(newHandler(&buf).WithAttrs([]slog.Attr{slog.Any("bound", k2)}))
			log.Info("open", "key", k1, "keyring", kr, "ptr", &k1)
			log.Info("grouped", slog.Group("g", "key", k1, "keyring", kr))
			log.Info("nested", "keys", []seal.Key{k1, k2}, "holder", struct {
				K  seal.Key
				KR *seal.Keyring
			}{k1, kr})
			log.With("k", k1).Warn("with")
			out := buf.String()
			leakcheck.RequireNoLeak(t, out, secrets...)
			require.Contains(t, out, k1.String(), "the key is logged, redacted")
			require.Contains(t, out, k2.String(), "a handler attribute is logged, redacted")
			require.Contains(t, out, strconv.FormatUint(uint64(kr.Current()), 10))
			require.Equal(t, 4, strings.Count(out, "\n"), "every record was written")
		})
	}
}

// encoding/json and encoding.TextMarshaler refuse a Key and a *Keyring
// with ErrNotEncodable rather than write anything, so an application that
// saves its key through an encoder finds out at once.
func TestKeysDoNotEncode(t *testing.T) {
	k1, k2, kr := redactKeys(t)
	secrets := [][]byte{k1.Bytes(), k2.Bytes()}
	for name, v := range map[string]any{
		"key":         k1,
		"pointer":     &k1,
		"keyring":     kr,
		"in a struct": struct{ K seal.Key }{k1},
		"in a slice":  []*seal.Keyring{kr},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := json.Marshal(v)
			require.ErrorIs(t, err, seal.ErrNotEncodable)
			require.Nil(t, out)
			leakcheck.RequireNoLeak(t, err.Error(), secrets...)
		})
	}
	for name, m := range map[string]encoding.TextMarshaler{"key": k1, "keyring": kr} {
		t.Run(name+" as text", func(t *testing.T) {
			out, err := m.MarshalText()
			require.ErrorIs(t, err, seal.ErrNotEncodable)
			require.Nil(t, out)
		})
	}
	var target *json.MarshalerError
	_, err := json.Marshal(k1)
	require.True(t, errors.As(err, &target))
}

// Keys are compared by their id (derived from their bytes): two keys
// made from the same bytes have one id and the same Bytes, keys of other
// bytes do not, and only the zero Key is the zero value.
func TestKeysCompareByID(t *testing.T) {
	k1, k2, _ := redactKeys(t)
	again, err := seal.NewKey(k1.Bytes())
	require.NoError(t, err)
	require.Equal(t, k1.ID(), again.ID())
	require.Equal(t, k1.Bytes(), again.Bytes())
	require.NotEqual(t, k1.ID(), k2.ID())
	require.False(t, k1 == seal.Key{})
	require.True(t, seal.Key{} == seal.Key{})
	require.Equal(t, make([]byte, seal.KeySize), seal.Key{}.Bytes())
}

// Two keys printed through fmt's reflection (in unexported fields, where
// their Format is not called) show no bytes and nothing derived from
// them: an XOR of the two outputs recovers nothing.
func TestKeysInUnexportedFieldsShowNoBytes(t *testing.T) {
	k1, k2, _ := redactKeys(t)
	type holder struct{ a, b seal.Key }
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%d"} {
		out := fmt.Sprintf(verb, holder{k1, k2})
		out += fmt.Sprintf(verb, &holder{k1, k2})
		for _, k := range []seal.Key{k1, k2} {
			for _, enc := range []string{fmt.Sprint(k.Bytes()), fmt.Sprintf("%x", k.Bytes()), strings.Trim(fmt.Sprint(k.Bytes()), "[]")} {
				require.NotContains(t, out, enc, verb)
			}
		}
		require.NotContains(t, out, "[32]uint8{", verb)
		require.NotContains(t, out, "&[", verb)
	}
}
