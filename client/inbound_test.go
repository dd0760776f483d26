package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// inboundIDs returns the ids of every message pending inbound on d, in
// sequence order, through the client's walk.
func (d *device) inboundIDs() []store.LogicalMessageID {
	d.tb.Helper()
	var ids []store.LogicalMessageID
	for m, err := range d.c.AllPendingInbound(context.Background(), nil) {
		require.NoError(d.tb, err)
		ids = append(ids, m.ID)
	}
	return ids
}

func (d *device) inboundCount() int64 {
	d.tb.Helper()
	n, err := d.c.PendingInboundCount(context.Background(), nil)
	require.NoError(d.tb, err)
	return n
}

// received returns the single message of res.
func received(tb testing.TB, res []client.ReceiveResult) *client.Message {
	tb.Helper()
	require.Len(tb, res, 1)
	m, ok := res[0].(*client.Message)
	require.True(tb, ok, "got %T", res[0])
	return m
}

// TestReceiveKeepsUntilFinalized: a received message is pending inbound,
// unacknowledged, until the application finalizes it; a copy arriving
// before that is given again, one arriving after is a duplicate,
// acknowledged again; the sender's pending count reaches 0 only then.
func TestReceiveKeepsUntilFinalized(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net, a, b := openPair(t, kind)
			id := a.send(bob, "kept")
			m := received(t, b.pollKeep())
			require.Equal(t, id, m.ID)
			require.Equal(t, alice, m.From)
			require.False(t, m.Again)
			require.Equal(t, "kept", string(m.Plaintext))
			require.Zero(t, net.Pending(alice), "no ACK before the application finalizes")
			require.EqualValues(t, 1, b.inboundCount())
			require.Equal(t, []store.LogicalMessageID{id}, b.inboundIDs())

			// The sender retries: the copy is given again, same row.
			require.Equal(t, []store.LogicalMessageID{id}, a.retry(bob))
			again := received(t, b.pollKeep())
			require.True(t, again.Again)
			require.Equal(t, m.Sequence, again.Sequence)
			require.Equal(t, "kept", string(again.Plaintext))
			require.EqualValues(t, 1, b.inboundCount(), "nothing stored twice")
			require.Zero(t, net.Pending(alice))
			require.EqualValues(t, 1, a.count(&bob))

			out, err := b.c.FinalizeInbound(ctx, m.Sequence)
			require.NoError(t, err)
			require.Equal(t, client.InboundOutcome{Status: client.Finalized, AckSent: true}, out)
			require.Zero(t, b.inboundCount())
			requireCleared(t, a.poll(), true)
			require.Zero(t, a.count(&bob))

			out, err = b.c.FinalizeInbound(ctx, m.Sequence)
			require.NoError(t, err)
			require.Equal(t, client.InboundOutcome{Status: client.NotPendingInbound}, out, "finalizing twice changes nothing")
			require.Zero(t, net.Pending(alice), "and sends nothing")
		})
	}
}

// TestLostAckIsSentAgain: the ACK of a finalized message whose hand-off
// failed is not lost: the sender's retry is a duplicate, acknowledged
// again from its processed id, never given to the application again.
func TestLostAckIsSentAgain(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net, a, b := openPair(t, kind)
			id := a.send(bob, "ack lost")
			m := received(t, b.pollKeep())
			net.FailNextSends(1)
			out, err := b.c.FinalizeInbound(ctx, m.Sequence)
			require.NoError(t, err)
			require.Equal(t, client.InboundOutcome{Status: client.Finalized, AckSent: false}, out)
			require.Zero(t, b.inboundCount(), "the row is gone whatever the hand-off did")
			require.EqualValues(t, 1, a.count(&bob))

			require.Equal(t, []store.LogicalMessageID{id}, a.retry(bob))
			res := b.pollKeep()
			require.Len(t, res, 1)
			require.Equal(t, &client.Duplicate{From: alice, ID: id, AckSent: true}, res[0])
			require.Zero(t, b.inboundCount())
			requireCleared(t, a.poll(), true)
			require.Zero(t, a.count(&bob))
		})
	}
}

// TestDiscardInbound: a discard removes the message and acknowledges it
// as a finalize does (the sender cannot tell them apart); the other
// pending inbound messages are untouched.
func TestDiscardInbound(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net, a, b := openPair(t, kind)
			first := a.send(bob, "unwanted")
			second := a.send(bob, "kept")
			res := b.pollKeep()
			require.Len(t, res, 2)
			m := res[0].(*client.Message)
			require.Equal(t, first, m.ID)

			net.ResetCalls()
			out, err := b.c.DiscardInbound(ctx, m.Sequence)
			require.NoError(t, err)
			require.Equal(t, client.InboundOutcome{Status: client.Discarded, AckSent: true}, out)
			discardCalls := net.Calls()
			require.Equal(t, []store.LogicalMessageID{second}, b.inboundIDs())
			requireCleared(t, a.poll(), true)
			require.Equal(t, []store.LogicalMessageID{second}, a.pendingIDs(&bob))

			net.ResetCalls()
			out, err = b.c.FinalizeInbound(ctx, res[1].(*client.Message).Sequence)
			require.NoError(t, err)
			require.Equal(t, client.Finalized, out.Status)
			finalizeCalls := net.Calls()
			require.Equal(t, ops(discardCalls), ops(finalizeCalls), "a discard sends what a finalize sends")
			require.Len(t, finalizeCalls, 1)
			require.Equal(t, len(discardCalls[0].Envelope), len(finalizeCalls[0].Envelope), "an ACK of the same size")

			out, err = b.c.DiscardInbound(ctx, m.Sequence)
			require.NoError(t, err)
			require.Equal(t, client.NotPendingInbound, out.Status)
		})
	}
}

// TestPendingInboundSurvivesRestart: a message received and not finalized
// is given again by the start walk after a restart, and finalizing it
// then acknowledges it.
func TestPendingInboundSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	_, a, b := openPair(t, sqliteKind)
	id := a.send(bob, "before the crash")
	m := received(t, b.pollKeep())
	b.reopen()
	var got []store.InboundMessage
	for im, err := range b.c.AllPendingInbound(ctx, nil) {
		require.NoError(t, err)
		got = append(got, im)
	}
	require.Len(t, got, 1)
	require.Equal(t, store.InboundMessage{Sequence: m.Sequence, Sender: alice, ID: id, Plaintext: []byte("before the crash")}, got[0])
	out, err := b.c.FinalizeInbound(ctx, got[0].Sequence)
	require.NoError(t, err)
	require.Equal(t, client.InboundOutcome{Status: client.Finalized, AckSent: true}, out)
	requireCleared(t, a.poll(), true)
}

// TestInboundPagesAndCount: pages on the inbound sequence with a sender
// filter, bounds checked, counts without opening.
func TestInboundPagesAndCount(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net, a, b := openPair(t, kind)
			c := mustOpenKind(t, kind, net, carol)
			var fromAlice []store.LogicalMessageID
			for i := range 5 {
				fromAlice = append(fromAlice, a.send(bob, fmt.Sprintf("a%d", i)))
				c.send(bob, fmt.Sprintf("c%d", i))
			}
			b.pollKeep()
			require.EqualValues(t, 10, b.inboundCount())
			n, err := b.c.PendingInboundCount(ctx, &alice)
			require.NoError(t, err)
			require.EqualValues(t, 5, n)

			var ids []store.LogicalMessageID
			req := store.InboundPageRequest{Limit: 2, Sender: &alice}
			for {
				page, err := b.c.PendingInbound(ctx, req)
				require.NoError(t, err)
				require.LessOrEqual(t, len(page.Messages), 2)
				for _, m := range page.Messages {
					require.Equal(t, alice, m.Sender)
					ids = append(ids, m.ID)
				}
				if page.NextAfterSequence == nil {
					break
				}
				req.After = page.NextAfterSequence
			}
			require.Equal(t, fromAlice, ids)

			for _, bad := range []store.InboundPageRequest{{Limit: 0}, {Limit: store.MaxPageSize + 1}, {Limit: 1, After: ptr(int64(-1))}, {Limit: 1, Sender: &store.DeviceAddress{}}} {
				_, err := b.c.PendingInbound(ctx, bad)
				require.ErrorIs(t, err, store.ErrInvalidArgument, "%+v", bad)
			}
			require.EqualValues(t, 10, b.inboundCount(), "a refused page changes nothing")
		})
	}
}

// TestFinalizeRaces runs a finalize against what can happen to the same
// message at the same time, under the race detector: a copy arriving, a
// discard, a second finalize, and (SQLite) a storage key rotation. Each
// race ends in one of the outcomes the rules allow: the row removed once,
// one ACK, the sender's message cleared, nothing given to the
// application after its finalize.
func TestFinalizeRaces(t *testing.T) {
	ctx := context.Background()
	t.Run("finalize vs a copy arriving", func(t *testing.T) {
		for _, kind := range bothStores {
			t.Run(string(kind), func(t *testing.T) {
				for range 20 {
					_, a, b := openPair(t, kind)
					id := a.send(bob, "raced")
					m := received(t, b.pollKeep())
					require.Equal(t, []store.LogicalMessageID{id}, a.retry(bob))
					copies, err := b.net.Receive(ctx, bob)
					require.NoError(t, err)
					require.Len(t, copies, 1)

					var (
						wg  sync.WaitGroup
						out client.InboundOutcome
						res client.ReceiveResult
						e1  error
						e2  error
					)
					wg.Go(func() { out, e1 = b.c.FinalizeInbound(ctx, m.Sequence) })
					wg.Go(func() { res, e2 = b.c.Receive(ctx, copies[0]) })
					wg.Wait()
					require.NoError(t, e1)
					require.NoError(t, e2)
					require.Equal(t, client.Finalized, out.Status)
					switch r := res.(type) {
					case *client.Message: // the copy came first: given again
						require.True(t, r.Again)
						require.Equal(t, m.Sequence, r.Sequence)
					case *client.Duplicate: // the finalize came first
						require.Equal(t, id, r.ID)
					default:
						t.Fatalf("copy: %T", res)
					}
					require.Zero(t, b.inboundCount())
					res2 := a.poll()
					require.NotEmpty(t, acks(res2))
					require.Zero(t, a.count(&bob))
				}
			})
		}
	})
	t.Run("finalize vs discard, finalize vs finalize", func(t *testing.T) {
		for _, kind := range bothStores {
			t.Run(string(kind), func(t *testing.T) {
				_, a, b := openPair(t, kind)
				for i := range 20 {
					a.send(bob, fmt.Sprintf("m%d", i))
				}
				res := b.pollKeep()
				require.Len(t, res, 20)
				for i, r := range res {
					seq := r.(*client.Message).Sequence
					second := b.c.DiscardInbound
					want := client.Discarded
					if i%2 == 1 {
						second, want = b.c.FinalizeInbound, client.Finalized
					}
					var (
						wg     sync.WaitGroup
						o1, o2 client.InboundOutcome
						e1, e2 error
					)
					wg.Go(func() { o1, e1 = b.c.FinalizeInbound(ctx, seq) })
					wg.Go(func() { o2, e2 = second(ctx, seq) })
					wg.Wait()
					require.NoError(t, e1)
					require.NoError(t, e2)
					got := []client.InboundStatus{o1.Status, o2.Status}
					require.Contains(t, [][]client.InboundStatus{
						{client.Finalized, client.NotPendingInbound},
						{client.NotPendingInbound, want},
					}, got, "message %d", i)
					require.Equal(t, 1, countTrue(o1.AckSent, o2.AckSent), "one ACK")
				}
				require.Zero(t, b.inboundCount())
				require.Len(t, acks(a.poll()), 20)
				require.Zero(t, a.count(&bob))
			})
		}
	})
	t.Run("finalize vs key rotation", func(t *testing.T) {
		_, a, b := openPair(t, sqliteKind)
		const n = 40
		for i := range n {
			a.send(bob, fmt.Sprintf("m%d", i))
		}
		res := b.pollKeep()
		require.Len(t, res, n)
		next, err := seal.GenerateKey()
		require.NoError(t, err)
		var (
			wg     sync.WaitGroup
			rotErr error
		)
		wg.Go(func() { rotErr = b.sql.RotateKey(ctx, next, 1, nil) })
		for i, r := range res {
			if i%2 == 0 {
				out, err := b.c.FinalizeInbound(ctx, r.(*client.Message).Sequence)
				require.NoError(t, err)
				require.Equal(t, client.Finalized, out.Status)
			}
		}
		wg.Wait()
		require.NoError(t, rotErr)
		// The rest opens under the new key alone, after a restart too.
		b.kr = mustKeyring(t, next)
		b.reopen()
		var left []string
		for m, err := range b.c.AllPendingInbound(ctx, nil) {
			require.NoError(t, err)
			left = append(left, string(m.Plaintext))
		}
		var want []string
		for i := 1; i < n; i += 2 {
			want = append(want, fmt.Sprintf("m%d", i))
		}
		require.Equal(t, want, left)
		require.Len(t, acks(a.poll()), n/2)
	})
}

func countTrue(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

func mustKeyring(tb testing.TB, k seal.Key) *seal.Keyring {
	tb.Helper()
	kr, err := seal.NewKeyring(k)
	require.NoError(tb, err)
	return kr
}
