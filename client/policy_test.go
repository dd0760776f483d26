package client_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
)

// TestEncryptPolicyAskedBeforeAnySession: a frame the policy refuses for
// a device without a session fetches no bundle (which would use up one of
// its one-time prekeys) and stores no session; the message is kept
// pending and the next allowed send starts the session.
func TestEncryptPolicyAskedBeforeAnySession(t *testing.T) {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	a := mustOpen(t, net, alice)
	b := mustOpen(t, net, bob)
	a.failEncryptions(1)
	net.ResetCalls()
	id, err := a.c.Send(ctx, bob, []byte("refused"))
	require.ErrorIs(t, err, client.ErrMessageNotSent)
	require.ErrorIs(t, err, errEncryptRefused)
	require.Equal(t, []store.DeviceAddress{bob}, a.askedToEncrypt())
	require.False(t, slices.Contains(ops(net.Calls()), transporttest.OpFetch), "no bundle fetched for a refused frame")
	st, err := a.st.Peer(ctx, bob)
	require.NoError(t, err)
	require.Nil(t, st.Session, "no session stored")
	require.Equal(t, []store.LogicalMessageID{id}, a.pendingIDs(&bob))

	require.NotEmpty(t, a.retry(bob))
	require.Contains(t, messages(t, b.poll()), "refused", "the next allowed send starts the session and delivers it")
}
