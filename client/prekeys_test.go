package client_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport"
)

// clock is a settable time source for Config.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

const testGrace = 24 * time.Hour

// withClock restarts d's client on its store with clk as its time source
// and testGrace as the signed prekey grace period.
func (d *device) withClock(clk *clock) {
	d.tb.Helper()
	cfg := d.config()
	cfg.Now, cfg.SignedPrekeyGrace = clk.Now, testGrace
	c, err := client.Open(context.Background(), cfg)
	require.NoError(d.tb, err)
	d.c = c
}

// initiationTo makes d initiate a session with to and returns the
// envelope, taken out of to's mailbox (to receive it when the test says).
func initiationTo(t *testing.T, d *device, to *device, text string) []byte {
	t.Helper()
	d.send(to.addr, text)
	envs, err := d.net.Receive(context.Background(), to.addr)
	require.NoError(t, err)
	require.Len(t, envs, 1)
	env, err := session.UnmarshalEnvelope(envs[0])
	require.NoError(t, err)
	require.NotNil(t, env.Initiation)
	return envs[0]
}

// TestSignedPrekeyRotationAndReplenishment: bob's one-time prekeys are all
// drained and his signed prekey is rotated twice. An initiation made with
// the first bundle is answered within the grace period and refused past
// it (changing nothing); after replenishment a third device's new
// initiation uses a fresh one-time prekey and the new signed prekey.
func TestSignedPrekeyRotationAndReplenishment(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			net := transport.NewNetwork()
			b := mustOpenKind(t, kind, net, bob)
			b.withClock(clk)
			a := mustOpenKind(t, kind, net, alice)
			c := mustOpenKind(t, kind, net, carol)
			d := mustOpenKind(t, kind, net, dave)

			drainPrekeys(t, net, bob)
			left, err := net.OneTimePrekeyCount(ctx, bob)
			require.NoError(t, err)
			require.Zero(t, left)
			first, err := net.Fetch(ctx, bob)
			require.NoError(t, err)
			// Both initiations name the first signed prekey, no one-time prekey.
			fromAlice := initiationTo(t, a, b, "old bundle, late")
			fromCarol := initiationTo(t, c, b, "old bundle, in time")

			require.NoError(t, b.c.RotateSignedPrekey(ctx))
			second, err := net.Fetch(ctx, bob)
			require.NoError(t, err)
			require.NotEqual(t, first.SignedPrekeyID, second.SignedPrekeyID)
			require.NoError(t, second.Verify())

			// Within the grace period the previous signed prekey is accepted.
			clk.advance(testGrace / 2)
			res, err := b.c.Receive(ctx, fromCarol)
			require.NoError(t, err)
			require.Equal(t, "old bundle, in time", string(res.(*client.Message).Plaintext))

			clk.advance(testGrace)
			require.NoError(t, b.c.RotateSignedPrekey(ctx))
			third, err := net.Fetch(ctx, bob)
			require.NoError(t, err)
			require.NotEqual(t, second.SignedPrekeyID, third.SignedPrekeyID)
			require.Empty(t, third.OneTimePrekeys, "still drained")

			// Replenish: below the threshold, back to OneTimePrekeys.
			added, err := b.c.ReplenishPrekeys(ctx)
			require.NoError(t, err)
			require.Equal(t, 5, added)
			left, err = net.OneTimePrekeyCount(ctx, bob)
			require.NoError(t, err)
			require.Equal(t, 5, left)
			added, err = b.c.ReplenishPrekeys(ctx)
			require.NoError(t, err)
			require.Zero(t, added, "at the threshold nothing is added")

			// A third device initiates with the new bundle.
			fromDave := initiationTo(t, d, b, "new bundle")
			env, err := session.UnmarshalEnvelope(fromDave)
			require.NoError(t, err)
			require.True(t, env.Initiation.HasOneTimePrekey)
			require.Equal(t, third.SignedPrekeyID, env.Initiation.SignedPrekeyID)
			res, err = b.c.Receive(ctx, fromDave)
			require.NoError(t, err)
			require.Equal(t, "new bundle", string(res.(*client.Message).Plaintext))

			// Past the grace period the first signed prekey is refused.
			var before map[string][]string
			if b.sql != nil {
				before = dumpTables(t, b.sql.DB())
			}
			_, err = b.c.Receive(ctx, fromAlice)
			require.ErrorIs(t, err, session.ErrUnknownPrekey)
			if b.sql != nil {
				require.Equal(t, before, dumpTables(t, b.sql.DB()), "a refused initiation changes no row")
			}

			st, err := b.st.Peer(ctx, alice)
			require.NoError(t, err)
			require.Equal(t, store.PeerState{}, st, "no session, initiation or pin for alice")

			// The rotated state survives a restart; both sessions work.
			b.withClock(clk)
			c.poll()
			d.poll()
			converse(t, c, b)
			converse(t, d, b)
			converse(t, b, c)
		})
	}
}
