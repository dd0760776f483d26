package client_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
)

// TestAcknowledgingNeverInitiates: bob only acknowledges what alice sends,
// more than MaxSkip+1 times on one of his sending chains before alice can
// answer it, while alice's own chain fills and she starts a new session.
// Bob's acknowledgements stay on the session he has: he starts none (no
// fetch of alice's bundle), so none meets alice's unanswered initiation
// as a simultaneous one, and each clears its message instead of being
// rejected (*client.Rejected) for a retry.
//
// Bob's chain answers alice's, and holds an ACK for each envelope of
// hers he got on it, plus those for messages of her previous chain that
// he finalizes later: m0, kept pending inbound, is one past a full chain.
// The last of them comes from FinalizeInbound, or from Poll acknowledging
// a retried copy of a message finalized before. Every step is one call:
// no interleaving is needed.
func TestAcknowledgingNeverInitiates(t *testing.T) {
	const chain = session.MaxSkip + 1 // envelopes a full sending chain holds
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		// fill sends alice's chain full and has bob acknowledge every
		// envelope of it; m0 is bob's pending inbound message of the
		// previous chain, which fill finalizes.
		fill func(t *testing.T, a, b *device, m0 *client.Message) []store.LogicalMessageID
	}{
		{"the last by a finalize", func(t *testing.T, a, b *device, m0 *client.Message) []store.LogicalMessageID {
			var ids []store.LogicalMessageID
			for i := range chain {
				ids = append(ids, a.send(bob, fmt.Sprint("m", i+1)))
			}
			got, err := b.c.PollAtMost(ctx, chain)
			require.NoError(t, err)
			require.Len(t, got, chain)
			finalize(t, b.c, got)
			finalize(t, b.c, []client.ReceiveResult{m0}) // one past bob's full chain
			return ids
		}},
		{"the last by a poll", func(t *testing.T, a, b *device, m0 *client.Message) []store.LogicalMessageID {
			var ids []store.LogicalMessageID
			for i := range chain - 1 {
				ids = append(ids, a.send(bob, fmt.Sprint("m", i+1)))
			}
			got, err := b.c.PollAtMost(ctx, chain-1)
			require.NoError(t, err)
			require.Len(t, got, chain-1)
			finalize(t, b.c, got)
			finalize(t, b.c, []client.ReceiveResult{m0}) // bob's chain is full
			// alice sends m1 again (its ACK not received yet): the last
			// envelope of her chain. Bob's next poll acknowledges the copy.
			again, err := a.c.SendWithID(ctx, bob, ids[0], []byte("m1"))
			require.NoError(t, err)
			require.True(t, again)
			return ids
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			net, a, b := openPair(t, memKind)
			// A fetch of alice's bundle is bob starting a session.
			requireNoFetchOfAlice := func() {
				t.Helper()
				for _, c := range net.Calls() {
					require.False(t, c.Op == transporttest.OpFetch && c.To == alice, "bob, only acknowledging, started a session")
				}
			}
			// m0 stays pending inbound at bob; his ACK of the second
			// message makes alice start her next chain.
			m0 := a.send(bob, "m0")
			a.send(bob, "answer this")
			res := b.pollKeep()
			require.Len(t, res, 2)
			finalize(t, b.c, res[1:])
			requireCleared(t, a.poll(), true)
			ids := append([]store.LogicalMessageID{m0}, tt.fill(t, a, b, res[0].(*client.Message))...)
			requireNoFetchOfAlice()

			// alice sends on: her chain is full, so this starts a new
			// session, unanswered until bob gets it.
			net.ResetCalls()
			last := a.send(bob, "after a full chain")
			require.Equal(t, []string{transporttest.OpFetch, transporttest.OpSend}, ops(net.Calls()), "alice's full chain starts a new session")
			a.requireInitiation(bob, true)
			res = b.poll()
			require.NotEmpty(t, res)
			for _, r := range res[:len(res)-1] {
				require.IsType(t, &client.Duplicate{}, r)
				require.True(t, r.(*client.Duplicate).AckSent)
			}
			require.Equal(t, []string{"after a full chain"}, messages(t, res[len(res)-1:]))

			// Every ACK clears its message: none is rejected.
			cleared := map[store.LogicalMessageID]bool{}
			for _, r := range a.poll() {
				ack, ok := r.(*client.Acknowledgement)
				require.True(t, ok, "alice got %T %+v", r, r)
				if ack.Cleared {
					cleared[ack.ID] = true
				}
			}
			for _, id := range append(ids, last) {
				require.True(t, cleared[id], "%s cleared", id)
			}
			require.Zero(t, a.count(&bob))
			a.requireInitiation(bob, false)
			b.requireInitiation(alice, false)
			requireNoFetchOfAlice()
			converse(t, a, b)
			converse(t, b, a)
		})
	}
}

// TestRefusedAcknowledgementsHeal: bob finalizes more than MaxSkip+1
// messages before alice answers his chain, and the relay drops all but
// the last ACK, which alice refuses for skipping too far
// (session.ErrTooManySkipped): her messages stay pending. Her retries,
// unanswered, fill her chain and start a new session, on which bob's ACKs
// of the copies clear everything; bob's application got each message once.
func TestRefusedAcknowledgementsHeal(t *testing.T) {
	const chain = session.MaxSkip + 1
	ctx := context.Background()
	net, a, b := openPair(t, memKind)
	// bob keeps a backlog of alice's first chain pending inbound, and
	// answers its last message, so that alice starts her next chain.
	const first = chain - 4 // the backlog of alice's first chain
	var want []string
	for i := range first {
		want = append(want, fmt.Sprint("m", i))
		a.send(bob, want[i])
	}
	a.send(bob, "answer this")
	backlog := b.pollKeep()
	require.Len(t, backlog, first+1)
	finalize(t, b.c, backlog[first:])
	requireCleared(t, a.poll(), true)
	backlog = backlog[:first]
	for i := range 5 {
		want = append(want, fmt.Sprint("n", i))
		a.send(bob, want[len(want)-1])
	}
	got := b.pollKeep()
	require.Equal(t, want[first:], messages(t, got))
	backlog = append(backlog, got...)
	require.Equal(t, want, messages(t, backlog))

	// chain+1 ACKs on one of bob's chains: the relay drops all but the last.
	net.DropNext(chain)
	finalize(t, b.c, backlog)
	res, err := a.c.Poll(ctx)
	require.ErrorIs(t, err, session.ErrTooManySkipped)
	require.Empty(t, res)
	require.EqualValues(t, chain+1, a.count(&bob))

	net.ResetCalls()
	rounds := 0
	for ; a.count(&bob) > 0; rounds++ {
		require.Less(t, rounds, 3, "retries heal the session")
		a.retry(bob)
		res := b.poll()
		for _, r := range res {
			require.IsType(t, &client.Duplicate{}, r, "bob's application got every message already")
		}
		res, err = a.c.Poll(ctx)
		if err != nil {
			require.ErrorIs(t, err, session.ErrTooManySkipped)
		}
		requireCleared(t, res, true)
	}
	// The first retry fills alice's chain and starts the new session, the
	// second sends on it what the refused ACKs left pending.
	require.Equal(t, 2, rounds)
	var fetched []store.DeviceAddress
	for _, c := range net.Calls() {
		if c.Op == transporttest.OpFetch {
			fetched = append(fetched, c.To)
		}
	}
	require.Equal(t, []store.DeviceAddress{bob}, fetched, "one new session, alice's")
	converse(t, a, b)
	converse(t, b, a)
}
