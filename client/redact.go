package client

import (
	"fmt"
	"log/slog"
	"strconv"

	"github.com/securemsg/storage/internal/redact"
)

// String returns a redacted description of the client: its address once
// initialized, never the identity, prekeys or sessions it holds.
func (c *Client) String() string {
	if c == nil {
		return "client.Client(nil)"
	}
	c.mu.RLock()
	addr, ok := c.addr, c.identity != nil
	c.mu.RUnlock()
	if !ok {
		return "client.Client(not initialized, redacted)"
	}
	return "client.Client(" + addr.String() + ", redacted)"
}

// GoString is what %#v prints: the redacted description.
func (c *Client) GoString() string { return c.String() }

// Format prints the redacted description under every verb and flag
// (%v %+v %#v %s %q %x %X %d, widths).
func (c *Client) Format(f fmt.State, verb rune) { redact.Format(f, verb, c.String()) }

// LogValue makes slog log the redacted description.
func (c *Client) LogValue() slog.Value { return slog.StringValue(c.String()) }

// MarshalJSON returns an error wrapping seal.ErrNotEncodable.
func (c *Client) MarshalJSON() ([]byte, error) {
	return nil, redact.Refuse("client.Client", "it is no value to encode")
}

// GobEncode returns an error wrapping seal.ErrNotEncodable.
func (c *Client) GobEncode() ([]byte, error) {
	return nil, redact.Refuse("client.Client", "it is no value to encode")
}

// String returns a redacted description of the message: its sender,
// logical id, sequence, whether it was given before, whether its sender is
// a first contact, and the plaintext's length, never its bytes. The Plaintext field is the one way to them.
func (m Message) String() string {
	return "client.Message{From: " + m.From.String() + ", ID: " + m.ID.String() + ", Sequence: " + strconv.FormatInt(m.Sequence, 10) +
		", Plaintext: " + redact.Bytes(m.Plaintext) + ", Again: " + strconv.FormatBool(m.Again) +
		", FirstContact: " + strconv.FormatBool(m.FirstContact) + "}"
}

// GoString is what %#v prints: the redacted description.
func (m Message) GoString() string { return m.String() }

// Format prints the redacted description under every verb and flag.
func (m Message) Format(f fmt.State, verb rune) { redact.Format(f, verb, m.String()) }

// LogValue makes slog log the message as a group of its sender, logical
// id, sequence, Again, FirstContact and the plaintext's length
// ("redacted (n bytes)").
func (m Message) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("From", m.From.String()),
		slog.String("ID", m.ID.String()),
		slog.Int64("Sequence", m.Sequence),
		slog.String("Plaintext", redact.Bytes(m.Plaintext)),
		slog.Bool("Again", m.Again),
		slog.Bool("FirstContact", m.FirstContact),
	)
}

// MarshalJSON returns an error wrapping seal.ErrNotEncodable.
func (m Message) MarshalJSON() ([]byte, error) {
	return nil, redact.Refuse("client.Message", "its fields are the one way to its plaintext; copy them to encode")
}

// GobEncode returns an error wrapping seal.ErrNotEncodable.
func (m Message) GobEncode() ([]byte, error) {
	return nil, redact.Refuse("client.Message", "its fields are the one way to its plaintext; copy them to encode")
}
