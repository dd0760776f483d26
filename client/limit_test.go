package client_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/store"
)

// A message of exactly store.MaxPlaintextSize bytes is accepted by Send,
// which stores it, hands it off and has it delivered whole, and by each
// store's InsertPending; one byte more is refused by both with
// store.ErrInvalidArgument, and nothing becomes pending or is handed off.
// The client and the store must draw the line at the same byte: a message
// the store kept but the client could not frame would stay pending
// forever, retried and failing.
func TestMessageSizeLimit(t *testing.T) {
	ctx := context.Background()
	largest := bytes.Repeat([]byte{0xa5}, store.MaxPlaintextSize)
	tooLarge := append(bytes.Clone(largest), 0x5a)
	for _, kind := range bothStores {
		t.Run(string(kind)+"/Send", func(t *testing.T) {
			net, a, b := openPair(t, kind)

			// Before any session: the refusal fetches nothing and stores
			// nothing, no session or pin included.
			before := storeSnapshot(t, a, bob)
			id, err := a.c.Send(ctx, bob, tooLarge)
			require.ErrorIs(t, err, store.ErrInvalidArgument)
			require.Zero(t, id)
			require.Equal(t, before, storeSnapshot(t, a, bob))
			require.Zero(t, net.Pending(bob))

			id, err = a.c.Send(ctx, bob, largest)
			require.NoError(t, err)
			require.Equal(t, []store.LogicalMessageID{id}, a.pendingIDs(nil))
			require.Equal(t, 1, net.Pending(bob))

			// With a session: still refused, and the message pending
			// before is all that is pending or handed off.
			_, err = a.c.Send(ctx, bob, tooLarge)
			require.ErrorIs(t, err, store.ErrInvalidArgument)
			require.Equal(t, []store.LogicalMessageID{id}, a.pendingIDs(nil))
			require.Equal(t, 1, net.Pending(bob))

			res := b.poll()
			require.Len(t, res, 1)
			msg, ok := res[0].(*client.Message)
			require.True(t, ok, "%T", res[0])
			require.Equal(t, id, msg.ID)
			require.Equal(t, largest, msg.Plaintext)
			requireCleared(t, a.poll(), true)
			require.Empty(t, a.pendingIDs(nil))
		})
		t.Run(string(kind)+"/InsertPending", func(t *testing.T) {
			_, a := openAlice(t, kind)
			first, second := store.NewLogicalMessageID(), store.NewLogicalMessageID()

			_, err := a.st.InsertPending(ctx, bob, first, tooLarge)
			require.ErrorIs(t, err, store.ErrInvalidArgument)
			require.Zero(t, a.count(nil))

			_, err = a.st.InsertPending(ctx, bob, second, largest)
			require.NoError(t, err)
			got := a.all(store.MaxPageSize, nil)
			require.Len(t, got, 1)
			require.Equal(t, second, got[0].ID)
			require.Equal(t, largest, got[0].Plaintext)

			_, err = a.st.InsertPending(ctx, bob, first, tooLarge)
			require.ErrorIs(t, err, store.ErrInvalidArgument)
			require.Equal(t, []store.LogicalMessageID{second}, a.pendingIDs(nil))
		})
	}
}
