package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/memstore"
	"github.com/securemsg/storage/transport/transporttest"
)

func TestSmokeConversation(t *testing.T) {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	mk := func(addr store.DeviceAddress) *client.Client {
		k, err := seal.GenerateKey()
		require.NoError(t, err)
		kr, err := seal.NewKeyring(k)
		require.NoError(t, err)
		c, err := client.Open(context.Background(), client.Config{Store: memstore.New(kr), Transport: net, Directory: net})
		require.NoError(t, err)
		require.NoError(t, c.Initialize(ctx, addr))
		return c
	}
	aAddr, bAddr := store.DeviceAddress{UserID: "alice", DeviceID: 1}, store.DeviceAddress{UserID: "bob", DeviceID: 1}
	a, b := mk(aAddr), mk(bAddr)
	id, err := a.Send(ctx, bAddr, []byte("hello"))
	require.NoError(t, err)
	n, err := a.PendingMessageCount(ctx, nil)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	res, err := b.Poll(ctx)
	require.NoError(t, err)
	require.Len(t, res, 1)
	m := res[0].(*client.Message)
	require.Equal(t, "hello", string(m.Plaintext))
	require.Equal(t, id, m.ID)
	out, err := b.FinalizeInbound(ctx, m.Sequence)
	require.NoError(t, err)
	require.Equal(t, client.InboundOutcome{Status: client.Finalized, AckSent: true}, out)
	res, err = a.Poll(ctx)
	require.NoError(t, err)
	require.Equal(t, &client.Acknowledgement{From: bAddr, ID: id, Cleared: true}, res[0])
	n, err = a.PendingMessageCount(ctx, nil)
	require.NoError(t, err)
	require.EqualValues(t, 0, n)
	// reply both ways
	id2, err := b.Send(ctx, aAddr, []byte("hi back"))
	require.NoError(t, err)
	res, err = a.Poll(ctx)
	require.NoError(t, err)
	m = res[0].(*client.Message)
	require.Equal(t, id2, m.ID)
	out, err = a.FinalizeInbound(ctx, m.Sequence)
	require.NoError(t, err)
	require.Equal(t, client.InboundOutcome{Status: client.Finalized, AckSent: true}, out)
	res, err = b.Poll(ctx)
	require.NoError(t, err)
	require.True(t, res[0].(*client.Acknowledgement).Cleared)
}
