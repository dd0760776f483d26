package store

// The types holding a sealed record's plaintext never print it: about
// keys and sessions (LocalIdentity, PeerState) and a message's
// (PendingMessage, InboundMessage, their unreadable twins and pages).
// Every fmt verb and flag, slog's handlers and the encoders see a
// redacted description with each part's length; gob and encoding/json
// refuse them (wrapping seal.ErrNotEncodable). Their fields are the one
// way to the bytes.

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"

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

// String returns a redacted description: the sequence, recipient and
// logical id, and the plaintext's length, never its bytes.
func (m PendingMessage) String() string {
	return "store.PendingMessage{Sequence: " + strconv.FormatInt(m.Sequence, 10) + ", Recipient: " + m.Recipient.String() +
		", ID: " + m.ID.String() + ", Plaintext: " + redact.Bytes(m.Plaintext) + "}"
}

// GoString is what %#v prints: the redacted description.
func (m PendingMessage) GoString() string { return m.String() }

// Format prints the redacted description under every verb and flag.
func (m PendingMessage) Format(f fmt.State, verb rune) { redact.Format(f, verb, m.String()) }

// LogValue makes slog log the message as a group of its sequence,
// recipient, logical id and the plaintext's length ("redacted (n
// bytes)").
func (m PendingMessage) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int64("Sequence", m.Sequence),
		slog.String("Recipient", m.Recipient.String()),
		slog.String("ID", m.ID.String()),
		slog.String("Plaintext", redact.Bytes(m.Plaintext)),
	)
}

// MarshalJSON returns an error wrapping seal.ErrNotEncodable.
func (m PendingMessage) MarshalJSON() ([]byte, error) {
	return nil, redact.Refuse("store.PendingMessage", howMessage)
}

// GobEncode returns an error wrapping seal.ErrNotEncodable.
func (m PendingMessage) GobEncode() ([]byte, error) {
	return nil, redact.Refuse("store.PendingMessage", howMessage)
}

const howMessage = "its fields are the one way to its plaintext; copy them to encode"

// String returns a redacted description: the row's sequence, recipient
// and logical id, the plaintext's length (nil for a row that did not
// open) and the cause.
func (u UnreadablePendingMessage) String() string {
	return "store.UnreadablePendingMessage{PendingMessage: " + u.PendingMessage.String() + ", Cause: " + causeText(u.Cause) + "}"
}

// GoString is what %#v prints: the redacted description.
func (u UnreadablePendingMessage) GoString() string { return u.String() }

// Format prints the redacted description under every verb and flag.
func (u UnreadablePendingMessage) Format(f fmt.State, verb rune) { redact.Format(f, verb, u.String()) }

// LogValue makes slog log the row as a group of its sequence, recipient,
// logical id, the plaintext's length and the cause.
func (u UnreadablePendingMessage) LogValue() slog.Value {
	return slog.GroupValue(append(u.PendingMessage.LogValue().Group(), slog.String("Cause", causeText(u.Cause)))...)
}

// MarshalJSON returns an error wrapping seal.ErrNotEncodable.
func (u UnreadablePendingMessage) MarshalJSON() ([]byte, error) {
	return nil, redact.Refuse("store.UnreadablePendingMessage", howMessage)
}

// GobEncode returns an error wrapping seal.ErrNotEncodable.
func (u UnreadablePendingMessage) GobEncode() ([]byte, error) {
	return nil, redact.Refuse("store.UnreadablePendingMessage", howMessage)
}

// String returns a redacted description: every message and unreadable
// row as they print, and the cursor.
func (p PendingMessagePage) String() string {
	return pageText("store.PendingMessagePage", p.Messages, p.Unreadable, p.NextAfterSequence)
}

// pageText is the redacted description of a page named name: every message
// and unreadable row as they print, and the cursor.
func pageText[M, U fmt.Stringer](name string, messages []M, unreadable []U, next *int64) string {
	var b strings.Builder
	b.WriteString(name + "{Messages: [")
	for i, m := range messages {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(m.String())
	}
	b.WriteString("], Unreadable: [")
	for i, u := range unreadable {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(u.String())
	}
	b.WriteString("], NextAfterSequence: " + cursorText(next) + "}")
	return b.String()
}

// GoString is what %#v prints: the redacted description.
func (p PendingMessagePage) GoString() string { return p.String() }

// Format prints the redacted description under every verb and flag.
func (p PendingMessagePage) Format(f fmt.State, verb rune) { redact.Format(f, verb, p.String()) }

// LogValue makes slog log the page as a group of its counts of messages
// and unreadable rows and its cursor (none on the last page).
func (p PendingMessagePage) LogValue() slog.Value {
	return pageLogValue(len(p.Messages), len(p.Unreadable), p.NextAfterSequence)
}

// MarshalJSON returns an error wrapping seal.ErrNotEncodable.
func (p PendingMessagePage) MarshalJSON() ([]byte, error) {
	return nil, redact.Refuse("store.PendingMessagePage", howMessage)
}

// GobEncode returns an error wrapping seal.ErrNotEncodable.
func (p PendingMessagePage) GobEncode() ([]byte, error) {
	return nil, redact.Refuse("store.PendingMessagePage", howMessage)
}

// String returns a redacted description: the sequence, sender and
// logical id, and the plaintext's length, never its bytes.
func (m InboundMessage) String() string {
	return "store.InboundMessage{Sequence: " + strconv.FormatInt(m.Sequence, 10) + ", Sender: " + m.Sender.String() +
		", ID: " + m.ID.String() + ", Plaintext: " + redact.Bytes(m.Plaintext) + "}"
}

// GoString is what %#v prints: the redacted description.
func (m InboundMessage) GoString() string { return m.String() }

// Format prints the redacted description under every verb and flag.
func (m InboundMessage) Format(f fmt.State, verb rune) { redact.Format(f, verb, m.String()) }

// LogValue makes slog log the message as a group of its sequence,
// sender, logical id and the plaintext's length.
func (m InboundMessage) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int64("Sequence", m.Sequence),
		slog.String("Sender", m.Sender.String()),
		slog.String("ID", m.ID.String()),
		slog.String("Plaintext", redact.Bytes(m.Plaintext)),
	)
}

// MarshalJSON returns an error wrapping seal.ErrNotEncodable.
func (m InboundMessage) MarshalJSON() ([]byte, error) {
	return nil, redact.Refuse("store.InboundMessage", howMessage)
}

// GobEncode returns an error wrapping seal.ErrNotEncodable.
func (m InboundMessage) GobEncode() ([]byte, error) {
	return nil, redact.Refuse("store.InboundMessage", howMessage)
}

// String returns a redacted description: the row's sequence, sender and
// logical id, the plaintext's length (nil for a row that did not open)
// and the cause.
func (u UnreadableInboundMessage) String() string {
	return "store.UnreadableInboundMessage{InboundMessage: " + u.InboundMessage.String() + ", Cause: " + causeText(u.Cause) + "}"
}

// GoString is what %#v prints: the redacted description.
func (u UnreadableInboundMessage) GoString() string { return u.String() }

// Format prints the redacted description under every verb and flag.
func (u UnreadableInboundMessage) Format(f fmt.State, verb rune) { redact.Format(f, verb, u.String()) }

// LogValue makes slog log the row as a group of its sequence, sender,
// logical id, the plaintext's length and the cause.
func (u UnreadableInboundMessage) LogValue() slog.Value {
	return slog.GroupValue(append(u.InboundMessage.LogValue().Group(), slog.String("Cause", causeText(u.Cause)))...)
}

// MarshalJSON returns an error wrapping seal.ErrNotEncodable.
func (u UnreadableInboundMessage) MarshalJSON() ([]byte, error) {
	return nil, redact.Refuse("store.UnreadableInboundMessage", howMessage)
}

// GobEncode returns an error wrapping seal.ErrNotEncodable.
func (u UnreadableInboundMessage) GobEncode() ([]byte, error) {
	return nil, redact.Refuse("store.UnreadableInboundMessage", howMessage)
}

// String returns a redacted description: every message and unreadable
// row as they print, and the cursor.
func (p InboundPage) String() string {
	return pageText("store.InboundPage", p.Messages, p.Unreadable, p.NextAfterSequence)
}

// GoString is what %#v prints: the redacted description.
func (p InboundPage) GoString() string { return p.String() }

// Format prints the redacted description under every verb and flag.
func (p InboundPage) Format(f fmt.State, verb rune) { redact.Format(f, verb, p.String()) }

// LogValue makes slog log the page as a group of its counts of messages
// and unreadable rows and its cursor (none on the last page).
func (p InboundPage) LogValue() slog.Value {
	return pageLogValue(len(p.Messages), len(p.Unreadable), p.NextAfterSequence)
}

// MarshalJSON returns an error wrapping seal.ErrNotEncodable.
func (p InboundPage) MarshalJSON() ([]byte, error) {
	return nil, redact.Refuse("store.InboundPage", howMessage)
}

// GobEncode returns an error wrapping seal.ErrNotEncodable.
func (p InboundPage) GobEncode() ([]byte, error) {
	return nil, redact.Refuse("store.InboundPage", howMessage)
}

// pageLogValue is the slog group of a page: its counts and its cursor,
// left out on the last page.
func pageLogValue(messages, unreadable int, next *int64) slog.Value {
	attrs := []slog.Attr{slog.Int("Messages", messages), slog.Int("Unreadable", unreadable)}
	if next != nil {
		attrs = append(attrs, slog.Int64("NextAfterSequence", *next))
	}
	return slog.GroupValue(attrs...)
}

// cursorText is a page's cursor as text: the sequence, or "nil".
func cursorText(next *int64) string {
	if next == nil {
		return "nil"
	}
	return strconv.FormatInt(*next, 10)
}

// causeText is an unreadable row's cause as text: its Error, or "nil".
// A cause never carries plaintext: nothing was opened.
func causeText(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
