package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/store"
)

// Poll on a closed client returns store.ErrClosed before it asks the transport
// for anything: the envelopes waiting in the device's mailbox stay there,
// and the next client on the store receives them. Draining the mailbox
// and then failing on every envelope would lose them.
func TestPollOnClosedClientLeavesMailbox(t *testing.T) {
	ctx := context.Background()
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			net, a, b := openPair(t, kind)
			b.send(alice, "one")
			b.send(alice, "two")
			require.Equal(t, 2, net.Pending(alice))
			before := storeSnapshot(t, a, bob)

			require.NoError(t, a.c.Close())
			net.ResetCalls()
			res, err := a.c.Poll(ctx)
			require.ErrorIs(t, err, store.ErrClosed)
			require.Empty(t, res)
			require.Empty(t, net.Calls(), "a closed client's Poll used the network")
			require.Equal(t, 2, net.Pending(alice), "the mailbox keeps its envelopes")
			require.Equal(t, before, storeSnapshot(t, a, bob), "the closed client changed its store")

			c, err := client.Open(ctx, a.config())
			require.NoError(t, err)
			a.c = c
			require.Equal(t, []string{"one", "two"}, messages(t, a.poll()))
		})
	}
}
