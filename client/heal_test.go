package client_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
)

// peerSnapshot is what a received envelope could change on d for peer:
// every table of a SQLite device, the peer's stored state and the pending
// count of a memstore device.
func peerSnapshot(tb testing.TB, d *device, peer store.DeviceAddress) any {
	tb.Helper()
	if d.sql != nil {
		return dumpTables(tb, sqliteaccess.DB(d.sql))
	}
	st, err := d.st.Peer(context.Background(), peer)
	require.NoError(tb, err)
	return []any{st, d.count(nil)}
}

// TestSessionHealsAfterRelayDrops: the relay drops everything alice sends
// bob while the app retries one pending message far more than MaxSkip
// times (each retry encrypts it again and advances the sending chain),
// and bob writes back in the middle of it. Once the relay delivers again,
// one retry delivers the message and its acknowledgement clears it; bob's
// application gets it once, late copies of the dropped envelopes are
// duplicates at most, and a replayed or forged envelope changes nothing.
// The retries alone carry alice's sending chain past what bob may skip,
// so the session must recover rather than fail every later envelope with
// ErrTooManySkipped.
func TestSessionHealsAfterRelayDrops(t *testing.T) {
	for _, tt := range []struct {
		name      string
		kind      storeKind
		drops     int  // hand-offs of the message dropped: the send and its retries
		writeBack bool // bob writes to alice halfway through
	}{
		{"memstore, 5000 dropped, bob writes back", memKind, 5000, true},
		{"sqlite, MaxSkip+2 dropped", sqliteKind, session.MaxSkip + 2, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			net, a, b := openPair(t, tt.kind)
			converse(t, a, b)
			net.ResetCalls()

			// The outage: every send of alice's is dropped, and so the
			// first half of her retries...
			half, acks := tt.drops/2, 0
			net.DropNext(half)
			id := a.send(bob, "through the outage")
			for range half - 1 {
				require.Equal(t, []store.LogicalMessageID{id}, a.retry(bob))
			}
			if tt.writeBack {
				// ...bob writes back (delivered), alice's ACK is dropped...
				b.send(alice, "are you there?")
				net.DropNext(1)
				require.Equal(t, []string{"are you there?"}, messages(t, a.poll()))
				acks = 1
			}
			// ...and the second half.
			net.DropNext(tt.drops - half)
			for range tt.drops - half {
				require.Equal(t, []store.LogicalMessageID{id}, a.retry(bob))
			}
			require.Zero(t, net.Pending(bob), "the relay delivered during the outage")
			st, err := a.st.Peer(ctx, bob)
			require.NoError(t, err)
			cur, err := session.UnmarshalSession(st.Session)
			require.NoError(t, err)
			require.True(t, cur.Initiating())
			curID := cur.InitiationID()
			require.Equal(t, curID[:], st.Initiation, "the stored initiation marker names the new session's initiation")
			outage := net.Calls()
			require.Equal(t, tt.drops+acks, sendsTo(outage, bob), "the message's hand-offs and the ACK")
			var fetches int
			for _, c := range outage {
				if c.Op == transporttest.OpFetch {
					fetches++
				}
			}
			var dropped [][]byte // the message's envelopes, without the ACK
			for _, c := range outage {
				if c.Op == transporttest.OpSend && c.To == bob {
					dropped = append(dropped, c.Envelope)
				}
			}
			if tt.writeBack {
				dropped = append(dropped[:half], dropped[half+1:]...)
			}

			// requireRefused checks that bob refuses raw with want and
			// that nothing changes.
			requireRefused := func(name string, raw []byte, want error) {
				t.Helper()
				before := peerSnapshot(t, b, alice)
				_, err := b.c.Receive(ctx, raw)
				require.ErrorIs(t, err, want, name)
				require.Equal(t, before, peerSnapshot(t, b, alice), "%s changed bob's state", name)
			}

			// The relay delivers again: one retry, one round trip.
			net.ResetCalls()
			require.Equal(t, []store.LogicalMessageID{id}, a.retry(bob))
			healing := net.Calls()[0].Envelope
			tampered := bytes.Clone(healing)
			tampered[len(tampered)-1] ^= 1
			requireRefused("tampered copy of the healing envelope", tampered, session.ErrDecrypt)
			bundle, err := net.Fetch(ctx, bob)
			require.NoError(t, err)
			requireRefused("forged initiation", forgedInitiation(t, alice, bob, pinned(t, a), bundle), session.ErrDecrypt)
			res, err := b.c.Poll(ctx)
			require.NoError(t, err)
			require.Equal(t, []string{"through the outage"}, messages(t, res))
			finalize(t, b.c, res)
			requireCleared(t, a.poll(), true)
			require.Zero(t, a.count(&bob))
			requireRefused("replay of the healing envelope", healing, session.ErrReplay)
			// How: a full sending chain started a new session, only then.
			require.Positive(t, fetches, "no new session was started")
			require.LessOrEqual(t, fetches, tt.drops/session.MaxSkip+1, "a new session only per full chain")
			t.Run("late copies of dropped envelopes are duplicates at most", func(t *testing.T) {
				for _, i := range []int{0, half, len(dropped) - 1} {
					r, err := b.c.Receive(ctx, dropped[i])
					if err == nil {
						require.IsType(t, &client.Duplicate{}, r, "dropped envelope %d", i)
					}
				}
				a.poll()
			})
			if tt.writeBack {
				// Bob's message, whose ACK was dropped, is delivered
				// again and acknowledged; it reached alice's application
				// once.
				require.Len(t, b.retry(alice), 1)
				res, err = a.c.Poll(ctx)
				require.NoError(t, err)
				require.Len(t, res, 1)
				require.IsType(t, &client.Duplicate{}, res[0])
				requireCleared(t, b.poll(), true)
			}
			converse(t, a, b)
			converse(t, b, a)
		})
	}
}
