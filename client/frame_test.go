package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/store"
)

// An authenticated envelope whose frame does not decode (a peer's newer
// frame version or type, a modified client) is refused with
// client.ErrMalformedFrame, which the application can tell apart, and
// changes nothing: bob's stored state of alice stays as it was, nothing
// is acknowledged, and alice's next message is received.
func TestReceiveMalformedFrame(t *testing.T) {
	ctx := context.Background()
	id := store.LogicalMessageID{1, 2, 3}
	message := client.MessageFrame(id, []byte("body"))
	for _, tt := range []struct {
		name  string
		frame []byte
	}{
		{"empty", nil},
		{"shorter than the header", message[:17]},
		{"unknown version", append([]byte{2}, message[1:]...)},
		{"unknown type", append([]byte{1, 3}, message[2:]...)},
		{"ack with a body", append([]byte{1, 2}, message[2:]...)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			net, a, b := openPair(t, sqliteKind)
			a.send(bob, "hello")
			require.Equal(t, []string{"hello"}, messages(t, b.poll()))
			acks(a.poll())

			require.NoError(t, client.SendFrame(ctx, a.c, bob, tt.frame))
			envs, err := net.Receive(ctx, bob)
			require.NoError(t, err)
			require.Len(t, envs, 1)
			before, err := b.st.Peer(ctx, alice)
			require.NoError(t, err)

			res, err := b.c.Receive(ctx, envs[0])
			require.ErrorIs(t, err, client.ErrMalformedFrame)
			require.Nil(t, res)
			after, err := b.st.Peer(ctx, alice)
			require.NoError(t, err)
			require.Equal(t, before, after, "bob's state of alice is unchanged")
			require.Empty(t, a.poll(), "nothing was acknowledged")

			a.send(bob, "after")
			require.Equal(t, []string{"after"}, messages(t, b.poll()))
		})
	}
}
