package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

// TestSendReceiveAck: a message is pending until its ACK arrives, which
// clears it; the conversation works both ways.
func TestSendReceiveAck(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			net, a, b := openPair(t, kind)

			id := a.send(bob, "hello")
			require.EqualValues(t, 1, a.count(nil))
			require.EqualValues(t, 1, a.count(&bob))
			require.Zero(t, a.count(&carol))
			pend := a.all(10, nil)
			require.Len(t, pend, 1)
			require.Equal(t, bob, pend[0].Recipient)
			require.Equal(t, id, pend[0].ID)
			require.Equal(t, "hello", string(pend[0].Plaintext))
			require.Positive(t, pend[0].Sequence)

			res := b.pollKeep()
			require.Len(t, res, 1)
			m := res[0].(*client.Message)
			require.Equal(t, &client.Message{From: alice, ID: id, Sequence: m.Sequence, Plaintext: []byte("hello"), FirstContact: true}, m)
			require.Positive(t, m.Sequence)
			require.Zero(t, net.Pending(alice), "no ACK before the application finalizes")
			n, err := b.c.PendingInboundCount(context.Background(), nil)
			require.NoError(t, err)
			require.EqualValues(t, 1, n)
			finalize(t, b.c, res)
			require.EqualValues(t, 1, a.count(nil), "pending until the ACK is received")

			res = a.poll()
			require.Equal(t, []client.ReceiveResult{&client.Acknowledgement{From: bob, ID: id, Cleared: true}}, res)
			require.Zero(t, a.count(nil))
			require.Empty(t, a.all(10, nil))

			id2 := b.send(alice, "hi back")
			res = a.poll()
			require.Len(t, res, 1)
			require.Equal(t, &client.Message{From: bob, ID: id2, Sequence: res[0].(*client.Message).Sequence, Plaintext: []byte("hi back")}, res[0])
			require.Equal(t, []client.ReceiveResult{&client.Acknowledgement{From: alice, ID: id2, Cleared: true}}, b.poll())
			require.Zero(t, b.count(nil))
		})
	}
}

// TestRepeatedAck: a message retried before the recipient's application
// finalized it is given again by its pending row (Again), unacknowledged;
// once finalized, a further retry is a duplicate, not given to the
// application again but acknowledged again, and the second ACK finds
// nothing pending (Cleared false).
func TestRepeatedAck(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			_, a, b := openPair(t, kind)
			keep := a.send(bob, "keep")
			id := a.send(bob, "twice")
			require.Equal(t, []store.LogicalMessageID{keep, id}, a.retry(bob))

			res := b.pollKeep()
			require.Len(t, res, 4)
			first, second := res[0].(*client.Message), res[1].(*client.Message)
			require.Equal(t, "keep", string(first.Plaintext))
			require.Equal(t, "twice", string(second.Plaintext))
			require.False(t, first.Again)
			require.Equal(t, &client.Message{From: alice, ID: keep, Sequence: first.Sequence, Plaintext: []byte("keep"), Again: true, FirstContact: true}, res[2])
			require.Equal(t, &client.Message{From: alice, ID: id, Sequence: second.Sequence, Plaintext: []byte("twice"), Again: true, FirstContact: true}, res[3])
			require.Empty(t, a.pollKeep(), "nothing acknowledged before the application finalizes")
			n, err := b.c.PendingInboundCount(context.Background(), nil)
			require.NoError(t, err)
			require.EqualValues(t, 2, n, "the copies stored nothing new")

			finalize(t, b.c, res)
			// A retry that crosses the ACKs: duplicates, acknowledged again.
			require.Equal(t, []store.LogicalMessageID{keep, id}, a.retry(bob))
			require.Equal(t, []client.ReceiveResult{
				&client.Duplicate{From: alice, ID: keep, AckSent: true},
				&client.Duplicate{From: alice, ID: id, AckSent: true},
			}, b.pollKeep())
			require.Equal(t, []client.ReceiveResult{
				&client.Acknowledgement{From: bob, ID: keep, Cleared: true},
				&client.Acknowledgement{From: bob, ID: id, Cleared: true},
				&client.Acknowledgement{From: bob, ID: keep, Cleared: false},
				&client.Acknowledgement{From: bob, ID: id, Cleared: false},
			}, a.pollKeep())
			require.Zero(t, a.count(nil))
			n, err = b.c.PendingInboundCount(context.Background(), nil)
			require.NoError(t, err)
			require.Zero(t, n)
		})
	}
}

// TestDuplicatedEnvelopes: a transport duplicate of an envelope (message
// or ACK) is a replay the ratchet rejects (ErrReplay) without changing
// anything; only a retry (a new envelope) makes a Duplicate and a second
// ACK.
func TestDuplicatedEnvelopes(t *testing.T) {
	ctx := context.Background()
	net, a, b := openPair(t, sqliteKind)
	net.DuplicateNext(1)
	id := a.send(bob, "dup")
	net.DuplicateNext(1) // bob's ACK
	res, err := b.c.Poll(ctx)
	require.ErrorIs(t, err, session.ErrReplay)
	require.Len(t, res, 1)
	require.Equal(t, &client.Message{From: alice, ID: id, Sequence: res[0].(*client.Message).Sequence, Plaintext: []byte("dup"), FirstContact: true}, res[0])
	finalize(t, b.c, res)

	require.Equal(t, 2, net.Pending(alice))
	res, err = a.c.Poll(ctx)
	require.ErrorIs(t, err, session.ErrReplay)
	require.Equal(t, []client.ReceiveResult{&client.Acknowledgement{From: bob, ID: id, Cleared: true}}, res)
	require.Zero(t, a.count(nil))
	converse(t, a, b)
}

// TestAckAfterAbandon: the recipient finalizes a copy sent before the
// abandon; its ACK finds nothing pending (Cleared false), recreates
// nothing and is no error.
func TestAckAfterAbandon(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net, a, b := openPair(t, kind)
			mustOpenKind(t, kind, net, carol) // never polls
			other := a.send(bob, "other")
			gone := a.send(bob, "abandoned, then delivered anyway")
			toCarol := a.send(carol, "carol is offline")
			require.Equal(t, []string{"other", "abandoned, then delivered anyway"}, messages(t, b.poll()))

			require.Equal(t, client.Abandoned, a.abandon(bob, gone))
			before := a.all(1, nil)
			require.Equal(t, []store.LogicalMessageID{other, toCarol}, idsOf(before))
			require.EqualValues(t, 2, a.count(nil))

			res, err := a.c.Poll(ctx)
			require.NoError(t, err)
			require.Equal(t, []client.ReceiveResult{
				&client.Acknowledgement{From: bob, ID: other, Cleared: true},
				&client.Acknowledgement{From: bob, ID: gone, Cleared: false},
			}, res)
			after := a.all(1, nil)
			require.Equal(t, []store.LogicalMessageID{toCarol}, idsOf(after), "nothing recreated")
			require.Equal(t, before[1], after[0])
			require.EqualValues(t, 1, a.count(nil))
			require.Zero(t, a.count(&bob))
			require.Equal(t, client.NotPending, a.abandon(bob, gone))
		})
	}
}
