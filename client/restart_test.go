package client_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
)

// TestRestartMidConversation: both devices restart (client.Open over a
// reopened SQLite store on the same file) in the middle of a
// conversation: pending messages with their sequences, the sequence
// high-water mark and the sessions survive, and the conversation goes on
// without a new bundle fetch.
func TestRestartMidConversation(t *testing.T) {
	net, a, b := openPair(t, sqliteKind)
	converse(t, a, b)

	delivered := a.send(bob, "delivered after the restart")
	notSent := a.sendFailed(bob, "hand-off failed before the restart")
	abandoned := a.send(bob, "highest, abandoned before the restart")
	require.Equal(t, client.Abandoned, a.abandon(bob, abandoned))
	before := a.all(100, nil)
	hw, err := sqliteaccess.SequenceHighWater(t.Context(), a.sql)
	require.NoError(t, err)
	require.Greater(t, hw, before[len(before)-1].Sequence, "the abandoned message held the highest sequence")

	a.reopen()
	b.reopen()
	require.Equal(t, before, a.all(100, nil), "pending messages, sequences and plaintexts survive")
	require.EqualValues(t, 2, a.count(&bob))
	hw2, err := sqliteaccess.SequenceHighWater(t.Context(), a.sql)
	require.NoError(t, err)
	require.Equal(t, hw, hw2)

	net.ResetCalls()
	fresh := a.send(bob, "after the restart")
	require.NotContains(t, ops(net.Calls()), transporttest.OpFetch, "the session survived")
	require.Greater(t, a.all(100, nil)[2].Sequence, hw, "a sequence is never reused, also across a restart")
	require.Equal(t, []store.LogicalMessageID{delivered, notSent, fresh}, a.pendingIDs(&bob))

	// The abandoned message had been handed off: abandon is not a recall.
	require.Equal(t, []string{"delivered after the restart", "highest, abandoned before the restart", "after the restart"}, messages(t, b.poll()))
	a.reopen()
	require.Equal(t, []client.ReceiveResult{
		&client.Acknowledgement{From: bob, ID: delivered, Cleared: true},
		&client.Acknowledgement{From: bob, ID: abandoned, Cleared: false},
		&client.Acknowledgement{From: bob, ID: fresh, Cleared: true},
	}, a.poll())
	require.Equal(t, []store.LogicalMessageID{notSent}, a.pendingIDs(nil))
	net.ResetCalls()
	require.Equal(t, []store.LogicalMessageID{notSent}, a.retry(bob))
	require.NotContains(t, ops(net.Calls()), transporttest.OpFetch)
	b.reopen()
	require.Equal(t, []string{"hand-off failed before the restart"}, messages(t, b.poll()))
	require.True(t, acks(a.poll())[0].Cleared)
	require.Zero(t, a.count(nil))

	// A duplicate after a restart is still recognised (processed ids persist).
	id := b.send(alice, "once")
	require.Equal(t, []string{"once"}, messages(t, a.poll()))
	b.reopen()
	a.reopen()
	require.Equal(t, []store.LogicalMessageID{id}, b.retry(alice))
	res := a.poll()
	require.Equal(t, []client.ReceiveResult{&client.Duplicate{From: bob, ID: id, AckSent: true}}, res)
	converse(t, a, b)
	converse(t, b, a)
}

// TestRestartBeforeInitialize: Open over an empty store gives a client
// that is not initialized; after Initialize and a restart it is.
func TestRestartBeforeInitialize(t *testing.T) {
	net := transporttest.NewNetwork()
	d := mustOpenUninitialized(t, sqliteKind, net, net)
	_, err := d.c.Address()
	require.ErrorIs(t, err, client.ErrNotInitialized)
	require.NoError(t, d.c.Initialize(t.Context(), alice))
	d.addr = alice
	d.reopen()
	require.Zero(t, d.count(nil))
}
