package memstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/store/memstore"

	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// A store made with a nil keyring panics nowhere: Claim refuses it with
// ErrInvalidArgument, so no client runs on it, every call that would seal
// fails with seal.ErrKey and stores nothing, and the reads find nothing.
// Unchecked, the nil keyring would panic at the first call that seals (a
// client's Initialize).
func TestNilKeyringReportsErrors(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(nil)
	alice := store.DeviceAddress{UserID: "alice", DeviceID: 1}
	bob := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	update := store.PeerState{Session: []byte("session"), Pin: []byte("pin")}

	release, err := s.Claim()
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	require.Nil(t, release)

	for _, tt := range []struct {
		name string
		call func() error
	}{
		{"InsertPending", func() error {
			_, err := s.InsertPending(ctx, bob, storetest.ID(1), []byte("x"))
			return err
		}},
		{"CommitSend", func() error {
			_, err := s.CommitSend(ctx, bob, storetest.ID(2), []byte("x"), update)
			return err
		}},
		{"CommitSendMany", func() error {
			_, err := s.CommitSendMany(ctx, storetest.ID(3), []byte("x"), []store.PeerUpdate{{Peer: bob, Update: update}})
			return err
		}},
		{"SaveLocalIdentity", func() error {
			return s.SaveLocalIdentity(ctx, store.LocalIdentity{Address: alice, Secret: []byte("secret")})
		}},
		{"SavePeer", func() error { return s.SavePeer(ctx, bob, update) }},
		{"CommitReceived", func() error {
			_, err := s.CommitReceived(ctx, bob, storetest.ID(4), nil, store.Inbound{Update: update})
			return err
		}},
		{"CommitAck", func() error {
			_, err := s.CommitAck(ctx, bob, storetest.ID(5), store.Inbound{Update: update})
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = tt.call() })
			require.ErrorIs(t, err, seal.ErrKey)
		})
	}

	require.NotPanics(t, func() {
		n, err := s.PendingMessageCount(ctx, nil)
		require.NoError(t, err)
		require.Zero(t, n, "nothing was stored")
		_, err = s.LocalIdentity(ctx)
		require.ErrorIs(t, err, store.ErrNotFound)
		st, err := s.Peer(ctx, bob)
		require.NoError(t, err)
		require.Equal(t, store.PeerState{}, st)
		page, err := s.PendingMessages(ctx, store.PageRequest{Limit: 10})
		require.NoError(t, err)
		require.Empty(t, page.Messages)
	})
}
