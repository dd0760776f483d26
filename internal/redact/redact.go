// Package redact is what every type holding key material or a sealed
// record's plaintext prints and encodes instead of it: a description
// under every fmt verb and flag, and a refusal to be encoded, wrapping
// seal.ErrNotEncodable.
package redact

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Format writes s for any verb: quoted for %q, padded to the width asked
// (on the left, or the right with the - flag). No verb or flag reaches
// what s describes.
func Format(f fmt.State, verb rune, s string) {
	if verb == 'q' {
		s = strconv.Quote(s)
	}
	if w, ok := f.Width(); ok && w > len(s) {
		pad := strings.Repeat(" ", w-len(s))
		if f.Flag('-') {
			s += pad
		} else {
			s = pad + s
		}
	}
	_, _ = io.WriteString(f, s)
}

// Bytes describes a secret byte slice by its length alone: "nil",
// "empty", or "redacted (n bytes)". nil and empty differ where a store's
// update tells unchanged from deleted.
func Bytes(b []byte) string {
	switch {
	case b == nil:
		return "nil"
	case len(b) == 0:
		return "empty"
	}
	return "redacted (" + strconv.Itoa(len(b)) + " bytes)"
}

// ErrNotEncodable is seal.ErrNotEncodable, defined here so that seal
// formats with Format without an import cycle.
var ErrNotEncodable = errors.New("key not encodable")

// Refuse is the error MarshalJSON and GobEncode of a type named what
// return: it wraps ErrNotEncodable, and says how to reach what the value
// holds (how).
func Refuse(what, how string) error {
	return fmt.Errorf("encode %s: %w: it holds secrets; %s", what, ErrNotEncodable, how)
}
