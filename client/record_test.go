package client_test

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// recordCounts is what a stored session record holds, read from its
// encoding (the layout session.Session.MarshalBinary documents), so that
// tests can check it without the session package exporting counters an
// application has no use for.
type recordCounts struct {
	archived                 int // archived states
	skipped, archivedSkipped int // skipped keys of the current state, of the archived ones together
	rejected, retired        int // remembered base keys
}

// countRecord reads the counts of an encoded session record (versions 1
// to 4), failing tb if the encoding does not have that layout.
func countRecord(tb testing.TB, raw []byte) recordCounts {
	tb.Helper()
	r := raw
	take := func(n int) []byte {
		require.GreaterOrEqual(tb, len(r), n, "truncated session record")
		b := r[:n]
		r = r[n:]
		return b
	}
	u8 := func() int { return int(take(1)[0]) }
	u16 := func() int { return int(binary.BigEndian.Uint16(take(2))) }
	address := func() { take(u16() + 8) } // user id length, user id, device id
	state := func() (skipped int) {
		address()
		address()
		take(2*64 + 1)         // identities, flags
		take(16 + 64 + 32 + 8) // initiation: id, identity, ephemeral, prekey ids
		take(4 + 5*32 + 3*4)   // envelopes sent, keys, Ns, Nr, PN
		take(u8() * 32)        // previous ratchet keys
		skipped = u16()
		take(skipped * (32 + 4 + 32))
		return skipped
	}
	require.Equal(tb, "SMSS", string(take(4)))
	v := u8()
	require.True(tb, v >= 1 && v <= 4, "session record version %d", v)
	var c recordCounts
	if v < 3 || u8() == 1 { // versions 3 and 4 flag the current state
		c.skipped = state()
	} else {
		address()
		address()
	}
	if v >= 2 {
		c.archived = u8()
		for range c.archived {
			c.archivedSkipped += state()
		}
		c.rejected = u8()
		take(c.rejected * 32)
	}
	if v >= 3 {
		c.retired = u8()
		take(c.retired * 32)
	}
	require.Empty(tb, r, "trailing bytes after the session record")
	return c
}
