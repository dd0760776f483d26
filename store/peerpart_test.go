package store_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/store"
)

// TestPeerPartString: each part prints its name, an unknown value its
// number, and a PeerUnreadableError names each damaged part by that name
// with its cause.
func TestPeerPartString(t *testing.T) {
	for _, tc := range []struct {
		part store.PeerPart
		want string
	}{
		{store.PeerSession, "session"},
		{store.PeerInitiation, "initiation"},
		{store.PeerPin, "identity pin"},
		{store.PeerPart(0), "PeerPart(0)"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			require.Equal(t, tc.want, tc.part.String())
		})
	}
	refused := errors.New("does not decode")
	err := &store.PeerUnreadableError{Peer: store.DeviceAddress{UserID: "bob", DeviceID: 1}, Damage: store.PeerDamage{Session: refused}}
	require.Equal(t, "unreadable peer state of bob/1; session: does not decode", err.Error())
	require.ErrorIs(t, err, store.ErrPeerUnreadable)
	require.ErrorIs(t, err, refused)
}
