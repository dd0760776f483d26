package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
)

// TestAbandonDuringUnconvergedCollision: alice and bob both send before
// either polls (a simultaneous initiation; alice < bob, so alice's wins).
// Bob abandons his losing message before polling. After convergence his
// retry does not send it, and the winning session works both ways.
func TestAbandonDuringUnconvergedCollision(t *testing.T) {
	for _, kind := range bothStores {
		for _, bobPollsFirst := range []bool{true, false} {
			name := string(kind) + "/alice-polls-first"
			if bobPollsFirst {
				name = string(kind) + "/bob-polls-first"
			}
			t.Run(name, func(t *testing.T) {
				net, a, b := openPair(t, kind)
				fromAlice := a.send(bob, "alice's initiation wins")
				lost := b.send(alice, "bob's initiation loses")
				keptByBob := b.send(alice, "bob keeps this one")

				a.requireInitiation(bob, true)
				b.requireInitiation(alice, true)

				// Abandon before anything converged: local only.
				net.ResetCalls()
				require.Equal(t, client.Abandoned, b.abandon(alice, lost))
				require.Empty(t, net.Calls())
				require.Equal(t, []store.LogicalMessageID{keptByBob}, b.pendingIDs(nil))

				pollAlice := func() {
					t.Helper()
					res := a.poll()
					for _, r := range res {
						switch r := r.(type) {
						case *client.Rejected:
							require.Equal(t, bob, r.From)
						case *client.Acknowledgement:
							require.Equal(t, fromAlice, r.ID)
							require.True(t, r.Cleared)
						default:
							t.Fatalf("alice got %T %+v", r, r)
						}
					}
				}
				if !bobPollsFirst {
					pollAlice() // bob's two initiation envelopes are rejected
				}
				a.requireInitiation(bob, true)
				// bob adopts alice's session and receives her message.
				require.Equal(t, []string{"alice's initiation wins"}, messages(t, b.poll()))
				b.requireInitiation(alice, false) // bob's initiation lost: marker gone
				pollAlice()
				a.requireInitiation(bob, false) // answered by bob's ACK
				require.Zero(t, a.count(nil), "bob's ACK on the winning session cleared alice's message")

				// Converged: bob's retry re-sends only what he kept.
				net.ResetCalls()
				require.Equal(t, []store.LogicalMessageID{keptByBob}, b.retry(alice))
				require.Equal(t, []string{transporttest.OpSend}, ops(net.Calls()), "no fetch: bob has the winning session")
				require.Equal(t, []string{"bob keeps this one"}, messages(t, a.poll()))
				res := b.poll()
				require.Equal(t, []client.ReceiveResult{&client.Acknowledgement{From: alice, ID: keptByBob, Cleared: true}}, res)
				require.Zero(t, b.count(nil))
				net.ResetCalls()
				require.Empty(t, b.retry(alice))
				require.Empty(t, net.Calls())

				converse(t, a, b)
				converse(t, b, a)
			})
		}
	}
}

// TestCollisionLoserKeepsPendingUntilRetry: without an abandon, the
// loser's messages stay pending through the collision and are delivered
// by the retry after convergence; the winner's are not re-sent.
func TestCollisionLoserKeepsPendingUntilRetry(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			_, a, b := openPair(t, kind)
			a.send(bob, "a1")
			b1 := b.send(alice, "b1")
			b2 := b.send(alice, "b2")
			a.poll() // rejects b1, b2
			require.Equal(t, []string{"a1"}, messages(t, b.poll()))
			a.poll()
			require.Zero(t, a.count(nil))
			require.Equal(t, []store.LogicalMessageID{b1, b2}, b.pendingIDs(nil))
			require.Equal(t, []store.LogicalMessageID{b1, b2}, b.retry(alice))
			require.Equal(t, []string{"b1", "b2"}, messages(t, a.poll()))
			b.poll()
			require.Zero(t, b.count(nil))
			converse(t, b, a)
		})
	}
}

// TestCollisionAcrossRestart: the unanswered initiation survives a
// restart of either side mid-collision and the collision still converges.
func TestCollisionAcrossRestart(t *testing.T) {
	_, a, b := openPair(t, sqliteKind)
	a.send(bob, "a1")
	lost := b.send(alice, "b1")
	kept := b.send(alice, "b2")
	a.reopen()
	b.reopen()
	require.Equal(t, client.Abandoned, b.abandon(alice, lost))
	a.poll()
	b.reopen()
	require.Equal(t, []string{"a1"}, messages(t, b.poll()))
	a.reopen()
	a.poll()
	require.Zero(t, a.count(nil))
	b.reopen()
	require.Equal(t, []store.LogicalMessageID{kept}, b.retry(alice))
	require.Equal(t, []string{"b2"}, messages(t, a.poll()))
	b.poll()
	require.Zero(t, b.count(nil))
	converse(t, a, b)
	converse(t, b, a)
}

// TestForgedCopyOfRejectedInitiation: a copy of bob's initiation that
// lost the collision, with a ciphertext of the forger's, fails with
// ErrDecrypt as any forged envelope does, instead of passing for the
// rejected initiation; it changes no row of alice's database, and the
// genuine copy is still rejected without a write.
func TestForgedCopyOfRejectedInitiation(t *testing.T) {
	ctx := context.Background()
	net, a, b := openPair(t, sqliteKind)
	a.send(bob, "a1")
	b.send(alice, "b1")
	genuine := lastSent(t, net, alice)
	res := a.poll()
	require.Len(t, res, 1)
	require.IsType(t, &client.Rejected{}, res[0])

	env, err := session.UnmarshalEnvelope(genuine)
	require.NoError(t, err)
	require.NotNil(t, env.Initiation)
	env.Ciphertext[0] ^= 1
	forged, err := env.MarshalBinary()
	require.NoError(t, err)

	before := dumpTables(t, sqliteaccess.DB(a.sql))
	_, err = a.c.Receive(ctx, forged)
	require.ErrorIs(t, err, session.ErrDecrypt)
	require.Equal(t, before, dumpTables(t, sqliteaccess.DB(a.sql)), "a forged copy changes no row")
	r, err := a.c.Receive(ctx, genuine)
	require.NoError(t, err)
	require.Equal(t, &client.Rejected{From: bob, InitiationID: env.Initiation.ID}, r)
	require.Equal(t, before, dumpTables(t, sqliteaccess.DB(a.sql)), "a genuine copy changes no row")

	require.Equal(t, []string{"a1"}, messages(t, b.poll()))
	a.poll()
	b.retry(alice)
	require.Equal(t, []string{"b1"}, messages(t, a.poll()))
	b.poll()
	converse(t, a, b)
	converse(t, b, a)
}
