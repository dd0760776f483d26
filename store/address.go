package store

// The identifiers every layer of the client shares (client, session,
// transport and the stores): the address of a device and the logical id
// of a message.

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
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

// Validate returns an error wrapping ErrInvalidArgument if the user id is empty or
// longer than MaxUserIDLen, or the device id is negative.
func (a DeviceAddress) Validate() error {
	switch {
	case a.UserID == "":
		return fmt.Errorf("%w: empty user id", ErrInvalidArgument)
	case len(a.UserID) > MaxUserIDLen:
		return fmt.Errorf("%w: user id longer than %d bytes", ErrInvalidArgument, MaxUserIDLen)
	case a.DeviceID < 0:
		return fmt.Errorf("%w: negative device id %d", ErrInvalidArgument, a.DeviceID)
	}
	return nil
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
func (a DeviceAddress) Less(b DeviceAddress) bool {
	if a.UserID != b.UserID {
		return a.UserID < b.UserID
	}
	return a.DeviceID < b.DeviceID
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

// ParseLogicalMessageID copies b into a LogicalMessageID. It returns an error
// wrapping ErrInvalidArgument if b is not exactly LogicalMessageIDLen bytes long.
func ParseLogicalMessageID(b []byte) (LogicalMessageID, error) {
	var id LogicalMessageID
	if len(b) != LogicalMessageIDLen {
		return id, fmt.Errorf("%w: logical message id is %d bytes, want %d", ErrInvalidArgument, len(b), LogicalMessageIDLen)
	}
	copy(id[:], b)
	return id, nil
}

// String returns the id in lowercase hex.
func (id LogicalMessageID) String() string { return hex.EncodeToString(id[:]) }
