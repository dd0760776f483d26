// Package leakcheck is what the redaction tests share: the ways a secret's
// bytes could show in text, and a check that a value holding them shows
// none under every fmt verb and flag, slog's text and JSON handlers, and
// that encoding/json and gob refuse it.
package leakcheck

import (
	"bytes"
	"encoding/base64"
	"encoding/gob"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/seal"
)

// Verbs are the fmt verbs, flags and widths every redacted value is
// printed with. %p is not among them: fmt never hands it to a Format
// method, and on a value that is not a pointer prints the value by
// reflection ("%!p(T={...})"), which go vet does not report for a type
// with Format. Only a type whose secrets sit behind a pointer fmt does
// not follow (seal.Key) resists it; package seal's tests add it.
var Verbs = []string{
	"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%o", "%O", "%b",
	"%c", "%U", "%e", "%f", "%g", "%t", "%T", "%#x", "% x", "% X",
	"%+q", "%#q", "%80x", "%-80v", "%080d", "%64s", "%.3s", "%10.2x", "%[1]v",
}

// Encodings returns the ways the bytes of secret could show in text: raw,
// hex (lower, upper, spaced), base64 (standard and URL, padded or not) and
// decimal lists (as fmt prints a []byte, and comma separated), plus every
// 4-byte run of the hex forms, so a partial print shows too.
func Encodings(secret []byte) []string {
	dec := make([]string, len(secret))
	for i, b := range secret {
		dec[i] = strconv.Itoa(int(b))
	}
	out := []string{
		string(secret),
		hex.EncodeToString(secret),
		strings.ToUpper(hex.EncodeToString(secret)),
		fmt.Sprintf("% x", secret),
		fmt.Sprintf("% X", secret),
		base64.StdEncoding.EncodeToString(secret),
		base64.RawStdEncoding.EncodeToString(secret),
		base64.URLEncoding.EncodeToString(secret),
		base64.RawURLEncoding.EncodeToString(secret),
		fmt.Sprint(secret),
		strings.Join(dec, " "),
		strings.Join(dec, ","),
		strings.Join(dec, ", "),
	}
	h := hex.EncodeToString(secret)
	for i := 0; i+8 <= len(h); i += 2 {
		out = append(out, h[i:i+8], strings.ToUpper(h[i:i+8]))
	}
	return out
}

// RequireNoLeak fails t if out holds any of secrets in any of their
// Encodings. An all-zero secret (a chain key not set yet) is skipped:
// zeros show in any padded number.
func RequireNoLeak(t testing.TB, out string, secrets ...[]byte) {
	t.Helper()
	for _, s := range secrets {
		if !bytes.ContainsFunc(s, func(r rune) bool { return r != 0 }) {
			continue
		}
		for _, enc := range Encodings(s) {
			require.NotContains(t, out, enc, "the output holds a secret's bytes")
		}
	}
}

// Everywhere checks that v shows none of secrets: under every verb of
// Verbs, fmt.Sprint and Sprintln, both slog handlers (as an attribute
// and in a group); and that encoding/json and gob refuse it with an error
// wrapping seal.ErrNotEncodable that shows none of them either. It
// returns what %v printed, for the caller to check what it says.
func Everywhere(t testing.TB, v any, secrets ...[]byte) string {
	t.Helper()
	for _, verb := range Verbs {
		RequireNoLeak(t, fmt.Sprintf(verb, v), secrets...)
	}
	RequireNoLeak(t, fmt.Sprint(v), secrets...)
	RequireNoLeak(t, fmt.Sprintln(v, v), secrets...)
	for name, h := range map[string]func(*bytes.Buffer) slog.Handler{
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		var buf bytes.Buffer
		log := slog.New(h(&buf))
		log.Info("value", "v", v)
		log.Info("grouped", slog.Group("g", "v", v))
		RequireNoLeak(t, buf.String(), secrets...)
		require.Equal(t, 2, strings.Count(buf.String(), "\n"), "%s: every record was written", name)
	}
	out, err := json.Marshal(v)
	require.ErrorIs(t, err, seal.ErrNotEncodable, "json: %s", out)
	RequireNoLeak(t, err.Error(), secrets...)
	var buf bytes.Buffer
	err = gob.NewEncoder(&buf).Encode(v)
	require.ErrorIs(t, err, seal.ErrNotEncodable, "gob")
	RequireNoLeak(t, err.Error()+buf.String(), secrets...)
	return fmt.Sprintf("%v", v)
}
