package client

import (
	"fmt"
	"log/slog"

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
