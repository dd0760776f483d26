package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport"
	"github.com/securemsg/storage/transport/transporttest"
)

// TestFailedHandOffThenRetry: a failed hand-off returns ErrMessageNotSent
// and keeps the message pending; the retry sends it and its ACK clears it.
func TestFailedHandOffThenRetry(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			net, a, b := openPair(t, kind)
			id := a.sendFailed(bob, "first try fails")
			require.Equal(t, []store.LogicalMessageID{id}, a.pendingIDs(nil))
			require.Zero(t, net.Pending(bob))

			net.ResetCalls()
			require.Equal(t, []store.LogicalMessageID{id}, a.retry(bob))
			require.Equal(t, []string{transporttest.OpSend}, ops(net.Calls()), "the session survived the failed hand-off: no fetch")
			require.Equal(t, []string{"first try fails"}, messages(t, b.poll()))
			require.True(t, acks(a.poll())[0].Cleared)
			require.Zero(t, a.count(nil))
		})
	}
}

// TestFailedFetch: without a session a failed bundle fetch is a failed
// send too; the retry fetches again.
func TestFailedFetch(t *testing.T) {
	ctx := context.Background()
	net, a, b := openPair(t, sqliteKind)
	net.FailNextFetches(1)
	_, err := a.c.Send(ctx, bob, []byte("no bundle yet"))
	require.ErrorIs(t, err, client.ErrMessageNotSent)
	require.ErrorIs(t, err, transporttest.ErrInjected)
	require.EqualValues(t, 1, a.count(&bob))
	net.ResetCalls()
	require.Len(t, a.retry(bob), 1)
	require.Equal(t, []string{transporttest.OpFetch, transporttest.OpSend}, ops(net.Calls()))
	require.Equal(t, []string{"no bundle yet"}, messages(t, b.poll()))
}

// TestRetryOrderAndStop: the retry sends in sequence order, only to its
// recipient, stops at the first failed hand-off and returns what it
// handed off; the next retry continues with the rest.
func TestRetryOrderAndStop(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net, a, b := openPair(t, kind)
			mustOpenKind(t, kind, net, carol)
			var want []store.LogicalMessageID
			for i, text := range []string{"one", "two", "three", "four", "five"} {
				if i == 2 {
					a.send(carol, "for carol") // interleaved, another recipient
				}
				want = append(want, a.send(bob, text))
			}
			require.Equal(t, []string{"one", "two", "three", "four", "five"}, messages(t, b.poll()))
			net.Receive(ctx, alice) // ACKs lost: everything stays pending

			// The third hand-off fails: two sent, then the stop.
			h := &countingFailTransport{Transport: net, failAt: 3}
			a.tr = h
			require.NoError(t, a.c.Close())
			c, err := client.Open(ctx, a.config())
			require.NoError(t, err)
			a.c = c
			net.ResetCalls()
			sent, err := c.RetryPendingMessages(ctx, bob)
			require.ErrorIs(t, err, client.ErrMessageNotSent)
			require.ErrorIs(t, err, transporttest.ErrInjected)
			require.Equal(t, want[:2], sent)
			require.Equal(t, 2, sendsTo(net.Calls(), bob))
			require.Zero(t, sendsTo(net.Calls(), carol))

			sent, err = c.RetryPendingMessages(ctx, bob)
			require.NoError(t, err)
			require.Equal(t, want, sent)
			res := b.poll()
			require.Len(t, res, 7)
			for i, r := range res {
				d, ok := r.(*client.Duplicate)
				require.True(t, ok, "%T", r)
				require.Equal(t, append(want[:2:2], want...)[i], d.ID)
			}
			require.Len(t, acks(a.poll()), 7)
			require.Zero(t, a.count(&bob))
			require.EqualValues(t, 1, a.count(&carol))
		})
	}
}

// countingFailTransport fails the failAt-th send (1-based) it sees.
type countingFailTransport struct {
	transport.Transport
	n, failAt int
}

func (c *countingFailTransport) Send(ctx context.Context, to store.DeviceAddress, env []byte) error {
	c.n++
	if c.n == c.failAt {
		return transporttest.ErrInjected
	}
	return c.Transport.Send(ctx, to, env)
}

// TestRetryFetchesOnlyWhenNeeded: the retry fetches a bundle only when a
// message waits and there is no session.
func TestRetryFetchesOnlyWhenNeeded(t *testing.T) {
	ctx := context.Background()
	net, a, b := openPair(t, sqliteKind)

	// Nothing pending, no session: no call at all.
	net.ResetCalls()
	require.Empty(t, a.retry(bob))
	require.Empty(t, net.Calls())

	// A message waits, no session (the fetch failed): one fetch.
	net.FailNextFetches(1)
	_, err := a.c.Send(ctx, bob, []byte("m"))
	require.ErrorIs(t, err, client.ErrMessageNotSent)
	net.ResetCalls()
	require.Len(t, a.retry(bob), 1)
	require.Equal(t, []string{transporttest.OpFetch, transporttest.OpSend}, ops(net.Calls()))

	// A session exists: messages are retried without any fetch.
	a.send(bob, "m2")
	net.ResetCalls()
	require.Len(t, a.retry(bob), 2)
	require.Equal(t, []string{transporttest.OpSend, transporttest.OpSend}, ops(net.Calls()))

	// Session, nothing pending: no call.
	b.poll()
	a.poll()
	require.Zero(t, a.count(nil))
	net.ResetCalls()
	require.Empty(t, a.retry(bob))
	require.Empty(t, net.Calls())
}

// TestRetryArguments: a malformed address is store.ErrInvalidArgument.
func TestRetryArguments(t *testing.T) {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	a := mustOpen(t, net, alice)
	_, err := a.c.RetryPendingMessages(ctx, store.DeviceAddress{UserID: "", DeviceID: 1})
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	_, err = a.c.Send(ctx, store.DeviceAddress{UserID: "x", DeviceID: -1}, []byte("m"))
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	_, err = a.c.Send(ctx, alice, []byte("self"))
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	require.Zero(t, a.count(nil))
}
