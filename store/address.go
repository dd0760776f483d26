package store

// The identifiers every layer of the client shares (client, session,
// transport and the stores): the address of a device and the logical id
// of a message.

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxUserIDLen is the longest user id accepted, in bytes.
const MaxUserIDLen = 256

// LogicalMessageIDLen is the length of a logical message id, in bytes.
const LogicalMessageIDLen = 16

// DeviceAddress names one device of one user: the unit a message is sent
// to and a session is held with.
type DeviceAddress struct {
	UserID   string
	DeviceID int64
}

// Validate returns an error wrapping ErrInvalidArgument if the user id is
// empty, longer than MaxUserIDLen, not valid UTF-8 or holds a character
// that is not text (see UserIDRune), or the device id is negative.
func (a DeviceAddress) Validate() error {
	switch {
	case a.UserID == "":
		return fmt.Errorf("%w: empty user id", ErrInvalidArgument)
	case len(a.UserID) > MaxUserIDLen:
		return fmt.Errorf("%w: user id longer than %d bytes", ErrInvalidArgument, MaxUserIDLen)
	case !utf8.ValidString(a.UserID):
		return fmt.Errorf("%w: user id %s is not valid UTF-8", ErrInvalidArgument, a)
	case a.DeviceID < 0:
		return fmt.Errorf("%w: negative device id %d", ErrInvalidArgument, a.DeviceID)
	}
	for i, r := range a.UserID {
		if !UserIDRune(r) {
			return fmt.Errorf("%w: user id %s holds %U at byte %d", ErrInvalidArgument, a, r, i)
		}
	}
	return nil
}

// UserIDRune reports whether r may appear in a user id: every character
// but the control characters (Unicode category Cc: newlines, tabs,
// terminal escapes, NUL), the format characters (Cf: bidi overrides and
// isolates, zero-width characters) and the line and paragraph separators
// (Zl, Zp). Those print nothing or rewrite what is printed around them,
// so that two different ids could read the same in a log or a terminal.
func UserIDRune(r rune) bool {
	if r < utf8.RuneSelf {
		// ASCII holds no Cf, Zl or Zp; its Cc are below space and DEL.
		// Every row a page reads is checked: no table lookup for it.
		return r >= ' ' && r != 0x7f
	}
	return !unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}

// String returns "user/device", for logs and messages. A user id holding
// anything but printable text (a newline, a terminal escape, a bidi
// control, invalid UTF-8) is written as a Go quoted string instead, its
// bytes escaped: addresses are read from files and the network, and their
// text reaches terminals and logs. A user id above MaxUserIDLen, which is
// malformed, is written quoted and cut to its first bytes and its length,
// so that an error naming it stays one short line.
func (a DeviceAddress) String() string {
	if n := len(a.UserID); n > MaxUserIDLen {
		return fmt.Sprintf("%q…(%d bytes)/%d", a.UserID[:shownUserIDLen], n, a.DeviceID)
	}
	for _, r := range a.UserID {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return fmt.Sprintf("%q/%d", a.UserID, a.DeviceID)
		}
	}
	return fmt.Sprintf("%s/%d", a.UserID, a.DeviceID)
}

// shownUserIDLen is how many bytes String shows of a user id above
// MaxUserIDLen.
const shownUserIDLen = 32

// Less orders addresses by user id, then device id. It gives rules that
// must agree on both devices (such as collision resolution) a total order.
func (a DeviceAddress) Less(b DeviceAddress) bool { return a.Compare(b) < 0 }

// Compare returns -1, 0 or +1 as a orders before, as or after b in Less's
// order (user id byte by byte, then device id), as slices.SortFunc takes.
func (a DeviceAddress) Compare(b DeviceAddress) int {
	if c := strings.Compare(a.UserID, b.UserID); c != 0 {
		return c
	}
	return cmp.Compare(a.DeviceID, b.DeviceID)
}

// LogicalMessageID identifies one message across retries: every envelope
// that carries the same message carries the same logical id, so the
// recipient can drop duplicates and the sender can match an ACK.
type LogicalMessageID [LogicalMessageIDLen]byte

// NewLogicalMessageID returns a random logical message id.
func NewLogicalMessageID() LogicalMessageID {
	var id LogicalMessageID
	// crypto/rand.Read never returns an error on supported platforms.
	_, _ = rand.Read(id[:])
	return id
}

// ParseLogicalMessageID copies b, the id's bytes, into a LogicalMessageID.
// It returns an error wrapping ErrInvalidArgument if b is not exactly
// LogicalMessageIDLen bytes long. ParseLogicalMessageIDString reads the id
// back from its text (String, MarshalText).
func ParseLogicalMessageID(b []byte) (LogicalMessageID, error) {
	var id LogicalMessageID
	if len(b) != LogicalMessageIDLen {
		return id, fmt.Errorf("%w: logical message id is %d bytes, want %d", ErrInvalidArgument, len(b), LogicalMessageIDLen)
	}
	copy(id[:], b)
	return id, nil
}

// ParseLogicalMessageIDString returns the id whose text is s: the
// 2*LogicalMessageIDLen hex digits String writes (either case). It returns
// an error wrapping ErrInvalidArgument for any other text.
func ParseLogicalMessageIDString(s string) (LogicalMessageID, error) {
	var id LogicalMessageID
	if len(s) != hex.EncodedLen(LogicalMessageIDLen) {
		return id, fmt.Errorf("%w: logical message id text is %d bytes, want %d hex digits", ErrInvalidArgument, len(s), hex.EncodedLen(LogicalMessageIDLen))
	}
	var b [LogicalMessageIDLen]byte
	if _, err := hex.Decode(b[:], []byte(s)); err != nil {
		return id, fmt.Errorf("%w: logical message id text %q: %w", ErrInvalidArgument, s, err)
	}
	return LogicalMessageID(b), nil
}

// String returns the id in lowercase hex.
func (id LogicalMessageID) String() string { return hex.EncodeToString(id[:]) }

// MarshalText returns the id's text, String's lowercase hex: JSON and
// other text encodings write the id as that string.
func (id LogicalMessageID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText sets id to the id whose text is b (see
// ParseLogicalMessageIDString). It returns an error wrapping
// ErrInvalidArgument, and leaves id unchanged, for any other text.
func (id *LogicalMessageID) UnmarshalText(b []byte) error {
	parsed, err := ParseLogicalMessageIDString(string(b))
	if err != nil {
		return err
	}
	*id = parsed
	return nil
}

// Format prints the id under fmt's verbs: %x and %X its 16 bytes in hex
// once (with fmt's flags for bytes: "% x" spaced, "%#x" 0x-prefixed), %v,
// %s and %q its String, %#v the Go value, and any other verb (%d, say)
// its bytes as an array, as fmt prints a [16]byte.
func (id LogicalMessageID) Format(f fmt.State, verb rune) {
	switch {
	case verb == 'x' || verb == 'X':
		fmt.Fprintf(f, fmt.FormatString(f, verb), id[:])
	case verb == 'v' && f.Flag('#'):
		fmt.Fprintf(f, "store.LogicalMessageID%s", strings.TrimPrefix(fmt.Sprintf("%#v", [LogicalMessageIDLen]byte(id)), "[16]uint8"))
	case verb == 'v' || verb == 's' || verb == 'q':
		fmt.Fprintf(f, fmt.FormatString(f, verb), id.String())
	default:
		fmt.Fprintf(f, fmt.FormatString(f, verb), [LogicalMessageIDLen]byte(id))
	}
}
