package benchpeers_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/testkit/benchpeers"
	"github.com/securemsg/storage/internal/testkit/benchseed"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
	"github.com/securemsg/storage/transport/transporttest"
)

// TestEstablish: after Establish, a send to every device is a bare
// hand-off (no bundle fetch), mailboxes and call log start empty, and
// Drain empties them again.
func TestEstablish(t *testing.T) {
	ctx := context.Background()
	keys, err := benchseed.NewKeyring()
	require.NoError(t, err)
	s, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "c.db"), keys)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	net := transporttest.NewNetwork()
	c, err := client.Open(context.Background(), client.Config{Store: s, Transport: net, Directory: net})
	require.NoError(t, err)
	require.NoError(t, c.Initialize(ctx, store.DeviceAddress{UserID: "me", DeviceID: 1}))

	p, err := benchpeers.Establish(ctx, c, net, "peer", 3)
	require.NoError(t, err)
	require.Equal(t, []store.DeviceAddress{{UserID: "peer", DeviceID: 1}, {UserID: "peer", DeviceID: 2}, {UserID: "peer", DeviceID: 3}}, p.Addrs)
	require.Empty(t, net.Calls())
	outs, err := c.SendToDevices(ctx, p.Addrs, store.NewLogicalMessageID(), []byte("x"))
	require.NoError(t, err)
	require.Len(t, outs, 3)
	var ops []string
	for _, call := range net.Calls() {
		ops = append(ops, call.Op)
	}
	require.Equal(t, []string{transporttest.OpSend, transporttest.OpSend, transporttest.OpSend}, ops, "no fetch: every session exists")
	for _, a := range p.Addrs {
		require.Equal(t, 1, net.Pending(a))
	}
	require.NoError(t, p.Drain(ctx))
	require.Empty(t, net.Calls())
	for _, a := range p.Addrs {
		require.Zero(t, net.Pending(a))
	}
}
