package client_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
)

// TestNotInitialized: before Initialize every call returns an error
// matching ErrNotInitialized and makes no network call.
func TestNotInitialized(t *testing.T) {
	ctx := context.Background()
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			net := transporttest.NewNetwork()
			d := mustOpenUninitialized(t, kind, net, net)
			c := d.c
			id := store.NewLogicalMessageID()
			calls := []struct {
				name string
				call func() error
			}{
				{"PendingMessages", func() error {
					_, err := c.PendingMessages(ctx, store.PageRequest{Limit: 10})
					return err
				}},
				{"PendingMessages filtered", func() error {
					_, err := c.PendingMessages(ctx, store.PageRequest{Limit: 10, Recipient: &bob, After: ptr[int64](3)})
					return err
				}},
				{"PendingRecipients", func() error {
					_, err := c.PendingRecipients(ctx, store.RecipientPageRequest{Limit: 10})
					return err
				}},
				{"PendingMessageCount", func() error { _, err := c.PendingMessageCount(ctx, nil); return err }},
				{"PendingMessageCount filtered", func() error { _, err := c.PendingMessageCount(ctx, &bob); return err }},
				{"AbandonPending", func() error { _, err := c.AbandonPending(ctx, bob, id); return err }},
				{"AbandonPendingMessage", func() error {
					_, err := c.AbandonPendingMessage(ctx, store.PendingMessage{Recipient: bob, ID: id, Sequence: 1})
					return err
				}},
				{"RetryPendingMessages", func() error { _, err := c.RetryPendingMessages(ctx, bob); return err }},
				{"Send", func() error { _, err := c.Send(ctx, bob, []byte("x")); return err }},
				{"Receive", func() error { _, err := c.Receive(ctx, []byte{1, 2, 3}); return err }},
				{"Poll", func() error { _, err := c.Poll(ctx); return err }},
				{"AcceptRemoteIdentityChange", func() error { return c.AcceptRemoteIdentityChange(ctx, bob, session.PublicIdentity{}) }},
				{"DeclineRemoteIdentityChange", func() error { return c.DeclineRemoteIdentityChange(ctx, bob, session.PublicIdentity{}) }},
				{"ReplenishPrekeys", func() error { _, err := c.ReplenishPrekeys(ctx); return err }},
				{"RotateSignedPrekey", func() error { return c.RotateSignedPrekey(ctx) }},
				{"PublishBundle", func() error { return c.PublishBundle(ctx) }},
				{"SendToDevices", func() error { _, err := c.SendToDevices(ctx, []store.DeviceAddress{bob}, id, []byte("x")); return err }},
				{"DiscardUnreadablePeerState", func() error { _, err := c.DiscardUnreadablePeerState(ctx, bob); return err }},
				{"AllPendingMessages", func() error {
					for _, err := range c.AllPendingMessages(ctx, nil) {
						return err
					}
					return nil
				}},
			}
			for _, tc := range calls {
				t.Run(tc.name, func(t *testing.T) {
					err := tc.call()
					require.ErrorIs(t, err, client.ErrNotInitialized)
					// Which call failed is said once.
					require.Equal(t, 1, strings.Count(err.Error(), "client: "), "%q", err)
				})
			}
			_, err := c.Address()
			require.ErrorIs(t, err, client.ErrNotInitialized)
			require.Empty(t, net.Calls(), "an uninitialized client makes no network call")

			// After Initialize the same calls work.
			require.NoError(t, c.Initialize(ctx, alice))
			n, err := c.PendingMessageCount(ctx, nil)
			require.NoError(t, err)
			require.Zero(t, n)
			st, err := c.AbandonPending(ctx, bob, id)
			require.NoError(t, err)
			require.Equal(t, client.NotPending, st)
		})
	}
}

// TestNewAndInitializeArguments covers the constructor's and Initialize's
// argument checks.
func TestNewAndInitializeArguments(t *testing.T) {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	_, err := client.Open(context.Background(), client.Config{Transport: net, Directory: net})
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	d := mustOpen(t, net, alice)
	require.ErrorIs(t, d.c.Initialize(ctx, store.DeviceAddress{}), store.ErrInvalidArgument)
	require.ErrorIs(t, d.c.Initialize(ctx, bob), client.ErrAlreadyInitialized)
	require.NoError(t, d.c.Initialize(ctx, alice), "re-initializing as the same device does nothing")
}
