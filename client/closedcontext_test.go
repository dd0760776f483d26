package client_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

// After Close every call fails with an error that matches store.ErrClosed
// and says, once, which call failed: never a bare "closed", and never the
// client's prefix twice. A closed client makes no network call.
func TestClosedCallsSayWhichCall(t *testing.T) {
	ctx := context.Background()
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			net, a := openAlice(t, kind)
			require.NoError(t, a.c.Close())
			net.ResetCalls()
			var id store.LogicalMessageID
			calls := []struct {
				name string
				call func(c *client.Client) error
			}{
				{"Initialize", func(c *client.Client) error { return c.Initialize(ctx, alice) }},
				{"Send", func(c *client.Client) error { _, err := c.Send(ctx, bob, []byte("x")); return err }},
				{"SendToDevices", func(c *client.Client) error {
					_, err := c.SendToDevices(ctx, []store.DeviceAddress{bob}, id, []byte("x"))
					return err
				}},
				{"RetryPendingMessages", func(c *client.Client) error { _, err := c.RetryPendingMessages(ctx, bob); return err }},
				{"PendingMessages", func(c *client.Client) error {
					_, err := c.PendingMessages(ctx, store.PageRequest{Limit: 1})
					return err
				}},
				{"PendingMessageCount", func(c *client.Client) error { _, err := c.PendingMessageCount(ctx, nil); return err }},
				{"PendingRecipients", func(c *client.Client) error {
					_, err := c.PendingRecipients(ctx, store.RecipientPageRequest{Limit: 1})
					return err
				}},
				{"AbandonPending", func(c *client.Client) error { _, err := c.AbandonPending(ctx, bob, id); return err }},
				{"AbandonPendingMessage", func(c *client.Client) error {
					_, err := c.AbandonPendingMessage(ctx, store.PendingMessage{Sequence: 1, Recipient: bob, ID: id})
					return err
				}},
				{"Poll", func(c *client.Client) error { _, err := c.Poll(ctx); return err }},
				{"DiscardUnreadablePeerState", func(c *client.Client) error {
					_, err := c.DiscardUnreadablePeerState(ctx, bob)
					return err
				}},
				{"AcceptRemoteIdentityChange", func(c *client.Client) error {
					return c.AcceptRemoteIdentityChange(ctx, bob, session.PublicIdentity{})
				}},
				{"ReplenishPrekeys", func(c *client.Client) error { _, err := c.ReplenishPrekeys(ctx); return err }},
				{"RotateSignedPrekey", func(c *client.Client) error { return c.RotateSignedPrekey(ctx) }},
				{"DeclineRemoteIdentityChange", func(c *client.Client) error {
					return c.DeclineRemoteIdentityChange(ctx, bob, session.PublicIdentity{})
				}},
				{"AllPendingMessages", func(c *client.Client) error {
					for _, err := range c.AllPendingMessages(ctx, nil) {
						return err
					}
					return nil
				}},
			}
			for _, tc := range calls {
				err := tc.call(a.c)
				require.ErrorIs(t, err, store.ErrClosed, tc.name)
				msg := err.Error()
				require.True(t, strings.HasPrefix(msg, "client: "), "%s: %q does not say it is the client's", tc.name, msg)
				require.Equal(t, 1, strings.Count(msg, "client: "), "%s: %q says its context twice", tc.name, msg)
				require.Empty(t, net.Calls(), "%s: a closed client used the network", tc.name)
			}
		})
	}
}
