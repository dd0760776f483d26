package session_test

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

// FuzzUnmarshalPrekeys: stored prekeys that do not decode are refused with
// ErrMalformedState, never a panic, and a version 2 record that decodes is
// written back byte for byte.
func FuzzUnmarshalPrekeys(f *testing.F) {
	bob := newDevice(f, "bob", 1, 3)
	require.NoError(f, bob.pk.Rotate(rand.Reader, bob.id, time.Unix(1000, 0), time.Hour))
	for _, pk := range []*session.Prekeys{bob.pk, newDevice(f, "eve", 1, 0).pk} {
		b, err := pk.MarshalBinary()
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		pk, err := session.UnmarshalPrekeys(in)
		if err != nil {
			require.ErrorIs(t, err, session.ErrMalformedState)
			return
		}
		out, err := pk.MarshalBinary()
		require.NoError(t, err)
		if in[0] == 2 {
			require.Equal(t, in, out)
		}
		_ = pk.Bundle(store.DeviceAddress{UserID: "bob", DeviceID: 1})
	})
}

// FuzzUnmarshalPin: a stored pin that does not decode is refused with
// ErrMalformedState, never a panic; one that decodes is written back byte
// for byte.
func FuzzUnmarshalPin(f *testing.F) {
	bob, eve := newDevice(f, "bob", 1, 0), newDevice(f, "eve", 1, 0)
	pin := session.NewPin(bob.addr, bob.id.Public())
	b, err := pin.MarshalBinary()
	require.NoError(f, err)
	f.Add(b)
	require.ErrorIs(f, pin.Check(eve.id.Public()), session.ErrIdentityChanged)
	b, err = pin.MarshalBinary()
	require.NoError(f, err)
	f.Add(b)
	pin.FirstContact = true
	b, err = pin.MarshalBinary()
	require.NoError(f, err)
	f.Add(b)
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := session.UnmarshalPin(in)
		if err != nil {
			require.ErrorIs(t, err, session.ErrMalformedState)
			return
		}
		out, err := p.MarshalBinary()
		require.NoError(t, err)
		require.Equal(t, in, out)
	})
}
