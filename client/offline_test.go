package client_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport"
	"github.com/securemsg/storage/transport/transporttest"
)

var errOffline = errors.New("test: connection refused")

// offlineDirectory is a directory that, while down, fails every call
// before it reaches the one it wraps, and counts the calls it failed.
type offlineDirectory struct {
	transport.Directory
	down   atomic.Bool
	failed atomic.Int32
}

func (d *offlineDirectory) fail() error {
	if d.down.Load() {
		d.failed.Add(1)
		return errOffline
	}
	return nil
}

func (d *offlineDirectory) Publish(ctx context.Context, b session.Bundle) error {
	if err := d.fail(); err != nil {
		return err
	}
	return d.Directory.Publish(ctx, b)
}

func (d *offlineDirectory) Fetch(ctx context.Context, addr store.DeviceAddress) (session.Bundle, error) {
	if err := d.fail(); err != nil {
		return session.Bundle{}, err
	}
	return d.Directory.Fetch(ctx, addr)
}

func (d *offlineDirectory) OneTimePrekeyCount(ctx context.Context, addr store.DeviceAddress) (int, error) {
	if err := d.fail(); err != nil {
		return 0, err
	}
	return d.Directory.OneTimePrekeyCount(ctx, addr)
}

// published reports whether addr has a bundle in net's directory.
func published(t *testing.T, net *transporttest.Network, addr store.DeviceAddress) bool {
	t.Helper()
	_, err := net.OneTimePrekeyCount(context.Background(), addr)
	if errors.Is(err, transport.ErrNoBundle) {
		return false
	}
	require.NoError(t, err)
	return true
}

// TestOfflineStart: an initialized client restarted without network
// opens and Initialize succeeds without any network call; what it holds
// (pending outbound and inbound) is there for the application; the
// bundle is published by PublishBundle once the directory answers.
func TestOfflineStart(t *testing.T) {
	ctx := context.Background()
	net, a, b := openPair(t, sqliteKind)
	b.send(alice, "to alice")
	_, err := a.c.Poll(ctx)
	require.NoError(t, err)
	a.send(bob, "to bob")
	net.ResetCalls()

	dir := &offlineDirectory{Directory: net}
	dir.down.Store(true)
	require.NoError(t, a.c.Close())
	c, err := client.Open(ctx, client.Config{Store: a.st, Transport: a.tr, Directory: dir})
	require.NoError(t, err)
	require.NoError(t, c.Initialize(ctx, alice), "an offline start")
	require.Zero(t, dir.failed.Load(), "Initialize of an initialized client makes no directory call")
	require.Empty(t, net.Calls(), "nor a transport call")
	in, err := c.PendingInbound(ctx, store.InboundPageRequest{Limit: 10})
	require.NoError(t, err)
	require.Len(t, in.Messages, 1)
	require.Equal(t, []byte("to alice"), in.Messages[0].Plaintext)
	out, err := c.PendingMessages(ctx, store.PageRequest{Limit: 10})
	require.NoError(t, err)
	require.Len(t, out.Messages, 1)

	err = c.PublishBundle(ctx)
	require.ErrorIs(t, err, client.ErrBundleNotPublished)
	require.ErrorIs(t, err, errOffline)
	dir.down.Store(false)
	require.NoError(t, c.PublishBundle(ctx))
	require.Equal(t, []transporttest.Call{{Op: transporttest.OpPublish, From: alice}}, net.Calls())
}

// TestFirstPublishFails: a first Initialize whose publication fails keeps
// the identity and says so with ErrBundleNotPublished; a restart's
// Initialize does not publish, PublishBundle does, and then a peer can
// reach the device.
func TestFirstPublishFails(t *testing.T) {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	b := mustOpen(t, net, bob)
	a := mustOpenUninitialized(t, sqliteKind, net, net)
	a.addr = alice
	dir := &offlineDirectory{Directory: net}
	dir.down.Store(true)
	require.NoError(t, a.c.Close())
	c, err := client.Open(ctx, client.Config{Store: a.st, Transport: net, Directory: dir})
	require.NoError(t, err)
	err = c.Initialize(ctx, alice)
	require.ErrorIs(t, err, client.ErrBundleNotPublished)
	require.ErrorIs(t, err, errOffline)
	got, err := c.Address()
	require.NoError(t, err, "the identity is kept")
	require.Equal(t, alice, got)
	require.False(t, published(t, net, alice))
	_, err = b.c.Send(ctx, alice, []byte("unreachable"))
	require.ErrorIs(t, err, transport.ErrNoBundle)

	a.c = c
	a.reopen()
	require.NoError(t, a.c.Initialize(ctx, alice))
	require.False(t, published(t, net, alice), "a restart's Initialize publishes nothing")
	require.NoError(t, a.c.PublishBundle(ctx))
	require.True(t, published(t, net, alice))
	b.send(alice, "reachable")
	_, err = a.c.Poll(ctx)
	require.NoError(t, err)
	in, err := a.c.PendingInbound(ctx, store.InboundPageRequest{Limit: 10})
	require.NoError(t, err)
	require.Len(t, in.Messages, 1)
	require.Equal(t, []byte("reachable"), in.Messages[0].Plaintext)
}
