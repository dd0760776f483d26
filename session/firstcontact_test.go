package session_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/session"
)

// A first contact's pin keeps that state through its encoding; a
// contact's pin is encoded as it always was (version 1).
func TestFirstContactPin(t *testing.T) {
	bob, eve := newDevice(t, "bob", 1, 0), newDevice(t, "eve", 1, 0)
	contact := session.NewPin(bob.addr, bob.id.Public())
	contactBytes, err := contact.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, byte(1), contactBytes[0], "a contact's pin keeps the version-1 encoding")

	first := contact
	first.FirstContact = true
	require.NoError(t, first.Check(bob.id.Public()))
	require.ErrorIs(t, first.Check(eve.id.Public()), session.ErrIdentityChanged)
	b, err := first.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, byte(2), b[0])
	got, err := session.UnmarshalPin(b)
	require.NoError(t, err)
	require.Equal(t, first, got)
	require.True(t, got.FirstContact)
	require.NotNil(t, got.Changed)

	got.FirstContact = false
	b, err = got.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, byte(1), b[0])
	require.Equal(t, contactBytes[1:len(contactBytes)-1], b[1:len(contactBytes)-1], "the same address and identity, in the same place")

	for _, v := range []byte{0, 3} {
		b[0] = v
		_, err = session.UnmarshalPin(b)
		require.ErrorIs(t, err, session.ErrMalformedState, "version %d", v)
	}
}
