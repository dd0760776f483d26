package session_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

// A first contact's pin keeps its state and count through its encoding; a
// contact's pin is encoded as it always was (version 1, no count), and a
// count on a contact's pin is refused rather than dropped.
func TestFirstContactPin(t *testing.T) {
	bob, eve := newDevice(t, "bob", 1, 0), newDevice(t, "eve", 1, 0)
	contact := session.NewPin(bob.addr, bob.id.Public())
	contactBytes, err := contact.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, byte(1), contactBytes[0], "a contact's pin keeps the version-1 encoding")

	first := contact
	first.FirstContact, first.Received = true, 7
	require.NoError(t, first.Check(bob.id.Public()))
	require.ErrorIs(t, first.Check(eve.id.Public()), session.ErrIdentityChanged)
	b, err := first.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, byte(2), b[0])
	got, err := session.UnmarshalPin(b)
	require.NoError(t, err)
	require.Equal(t, first, got)
	require.True(t, got.FirstContact)
	require.Equal(t, uint16(7), got.Received)

	got.Accepted()
	require.False(t, got.FirstContact)
	require.Zero(t, got.Received)
	require.NotNil(t, got.Changed, "accepting the contact is not accepting an identity change")
	b, err = got.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, byte(1), b[0])

	bad := contact
	bad.Received = 1
	_, err = bad.MarshalBinary()
	require.ErrorIs(t, err, store.ErrInvalidArgument)

	// A version-2 pin cut before its count does not decode.
	b, err = first.MarshalBinary()
	require.NoError(t, err)
	_, err = session.UnmarshalPin(b[:len(b)-1])
	require.ErrorIs(t, err, session.ErrMalformedState)
}
