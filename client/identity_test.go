package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
)

// converse makes a and b exchange one message each way (sessions, pins)
// and checks every pending message is acknowledged.
func converse(t *testing.T, a, b *device) {
	t.Helper()
	a.send(b.addr, "ping from "+a.addr.UserID)
	require.Equal(t, []string{"ping from " + a.addr.UserID}, messages(t, b.poll()))
	a.poll()
	b.send(a.addr, "pong from "+b.addr.UserID)
	require.Equal(t, []string{"pong from " + b.addr.UserID}, messages(t, a.poll()))
	b.poll()
	require.Zero(t, a.count(&b.addr))
	require.Zero(t, b.count(&a.addr))
}

// TestAbandonAcrossAcceptedIdentityChange: alice has pending messages for
// bob, bob's device is re-created with a new identity, alice sees the
// change, abandons one message, accepts the change, and the retry sends
// only the kept ones over a new session that then works both ways.
func TestAbandonAcrossAcceptedIdentityChange(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net, a, b := openPair(t, kind)
			converse(t, a, b)

			// alice sends on the old session; bob is gone before reading.
			m1 := a.send(bob, "m1")
			m2 := a.send(bob, "m2")
			m3 := a.send(bob, "m3")
			net.Receive(ctx, bob)                 // the old device's mailbox is lost with it
			b2 := mustOpenKind(t, kind, net, bob) // new identity, new bundle
			hello := b2.send(alice, "bob's new device")
			// the old device's last words arrive after the new identity.
			b.send(alice, "old device, old session")

			// alice sees the new identity and refuses it.
			res, err := a.c.Poll(ctx)
			require.ErrorIs(t, err, session.ErrIdentityChanged)
			require.Empty(t, res, "nothing is accepted from bob, not even on the old session")
			var ice *session.IdentityChangedError
			require.ErrorAs(t, err, &ice)
			require.Equal(t, bob, ice.Address)
			require.Equal(t, []store.LogicalMessageID{m1, m2, m3}, a.pendingIDs(&bob))

			// Until the change is accepted nothing is sent to bob.
			net.ResetCalls()
			_, err = a.c.Send(ctx, bob, []byte("blocked"))
			require.ErrorIs(t, err, session.ErrIdentityChanged)
			require.ErrorIs(t, err, client.ErrMessageNotSent)
			sent, err := a.c.RetryPendingMessages(ctx, bob)
			require.ErrorIs(t, err, session.ErrIdentityChanged)
			require.Empty(t, sent)
			require.Zero(t, sendsTo(net.Calls(), bob), "no envelope to an unaccepted identity")
			blocked := a.pendingIDs(&bob)[3]
			require.Equal(t, client.Abandoned, a.abandon(bob, blocked))

			// abandon m2, locally, while the change is not accepted.
			net.ResetCalls()
			require.Equal(t, client.Abandoned, a.abandon(bob, m2))
			require.Empty(t, net.Calls())

			require.NoError(t, a.acceptChange(bob))
			a.requireNoSession(bob, "accepting the change")
			net.ResetCalls()
			require.Equal(t, []store.LogicalMessageID{m1, m3}, a.retry(bob))
			require.Equal(t, []string{transporttest.OpFetch, transporttest.OpSend, transporttest.OpSend}, ops(net.Calls()))

			// bob's new device: alice's initiation wins the collision with
			// bob's own (alice < bob), bob gets m1 and m3 only.
			require.Equal(t, []string{"m1", "m3"}, messages(t, b2.poll()))
			res = a.poll()
			require.Len(t, acks(res), 2)
			requireCleared(t, res, true)
			require.Zero(t, a.count(nil))
			// bob's hello was lost with the losing initiation: retry it.
			require.Equal(t, []store.LogicalMessageID{hello}, b2.retry(alice))
			require.Equal(t, []string{"bob's new device"}, messages(t, a.poll()))
			b2.poll()
			require.Zero(t, b2.count(nil))
			a.requireInitiation(bob, false)
			b2.requireInitiation(alice, false)
			converse(t, a, b2)
			converse(t, b2, a)
		})
	}
}

// TestIdentityChangeWhenTheNewDeviceWinsTheCollision: the same as above
// with a sender whose address is greater than bob's, so bob's new
// device's initiation wins the collision with the sender's new one: the
// sender's kept messages are rejected once, then re-sent by the retry
// after convergence; the abandoned one never is.
func TestIdentityChangeWhenTheNewDeviceWinsTheCollision(t *testing.T) {
	zed := store.DeviceAddress{UserID: "zed", DeviceID: 1}
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net := transporttest.NewNetwork()
			z := mustOpenKind(t, kind, net, zed)
			b := mustOpenKind(t, kind, net, bob)
			converse(t, b, z)
			m1 := z.send(bob, "m1")
			m2 := z.send(bob, "m2")
			m3 := z.send(bob, "m3")
			net.Receive(ctx, bob)
			b2 := mustOpenKind(t, kind, net, bob)
			hello := b2.send(zed, "hello from the new device")
			_, err := z.c.Poll(ctx)
			require.ErrorIs(t, err, session.ErrIdentityChanged)
			require.Equal(t, client.Abandoned, z.abandon(bob, m2))
			require.NoError(t, z.acceptChange(bob))
			require.Equal(t, []store.LogicalMessageID{m1, m3}, z.retry(bob))

			// bob's initiation wins: zed's envelopes are rejected.
			for _, r := range b2.poll() {
				require.IsType(t, &client.Rejected{}, r)
			}
			require.Equal(t, []store.LogicalMessageID{hello}, b2.retry(zed))
			require.Equal(t, []string{"hello from the new device"}, messages(t, z.poll()))
			require.True(t, acks(b2.poll())[0].Cleared)
			z.requireInitiation(bob, false)

			net.ResetCalls()
			require.Equal(t, []store.LogicalMessageID{m1, m3}, z.retry(bob))
			require.Equal(t, []string{transporttest.OpSend, transporttest.OpSend}, ops(net.Calls()))
			require.Equal(t, []string{"m1", "m3"}, messages(t, b2.poll()))
			requireCleared(t, z.poll(), true)
			require.Zero(t, z.count(nil))
			require.Zero(t, b2.count(nil))
			converse(t, z, b2)
			converse(t, b2, z)
		})
	}
}

// TestSendSeesIdentityChangeInBundle: with a pin and no session (after an
// accepted change), a send fetches bob's bundle; a third identity in it is
// refused, recorded in the pin alone (no session, no initiation stored),
// and the message stays pending. The recorded change then refuses the next
// send before any fetch, on a restart too.
func TestSendSeesIdentityChangeInBundle(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net, a, b := openPair(t, kind)
			converse(t, a, b)
			b2 := mustOpenKind(t, kind, net, bob) // second identity
			b2.send(alice, "hello from the second device")
			_, err := a.c.Poll(ctx)
			require.ErrorIs(t, err, session.ErrIdentityChanged)
			require.NoError(t, a.acceptChange(bob))
			a.requireNoSession(bob, "accepting the change")

			mustOpenKind(t, kind, net, bob) // third identity, published before alice sends
			net.ResetCalls()
			id, err := a.c.Send(ctx, bob, []byte("to the second device"))
			require.ErrorIs(t, err, session.ErrIdentityChanged)
			require.ErrorIs(t, err, client.ErrMessageNotSent)
			require.Equal(t, []string{transporttest.OpFetch}, ops(net.Calls()), "the bundle is fetched, nothing is sent")
			require.Equal(t, []store.LogicalMessageID{id}, a.pendingIDs(&bob))
			a.requireNoSession(bob, "the refused bundle")

			restarts := []bool{false}
			if kind == sqliteKind {
				restarts = append(restarts, true)
			}
			for _, restart := range restarts {
				if restart {
					a.reopen()
				}
				net.ResetCalls()
				_, err = a.c.Send(ctx, bob, []byte("still refused"))
				require.ErrorIs(t, err, session.ErrIdentityChanged, "restart %v", restart)
				require.Empty(t, net.Calls(), "the stored change refuses the send before any fetch (restart %v)", restart)
			}
		})
	}
}
