package client_test

import (
	"context"
	"crypto/rand"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/store"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/transport/transporttest"
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
	require.NoError(d.tb, d.c.Close())
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
			net := transporttest.NewNetwork()
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
			finalize(t, b.c, []client.ReceiveResult{res})

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
			finalize(t, b.c, []client.ReceiveResult{res})

			// Past the grace period the first signed prekey is refused.
			var before map[string][]string
			if b.sql != nil {
				before = dumpTables(t, sqliteaccess.DB(b.sql))
			}
			_, err = b.c.Receive(ctx, fromAlice)
			require.ErrorIs(t, err, session.ErrUnknownPrekey)
			if b.sql != nil {
				require.Equal(t, before, dumpTables(t, sqliteaccess.DB(b.sql)), "a refused initiation changes no row")
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

// rawInitiation is an initiation to bundle's device by a new device
// built with package session alone, carrying a MESSAGE frame (see
// frame.go: version 1, type 1, logical id, body).
func rawInitiation(t testing.TB, from store.DeviceAddress, bundle session.Bundle, body string) []byte {
	t.Helper()
	id, err := session.GenerateIdentity(rand.Reader)
	require.NoError(t, err)
	s, err := session.Initiate(rand.Reader, id, from, bundle)
	require.NoError(t, err)
	msgID := store.NewLogicalMessageID()
	frame := append(append([]byte{1, 1}, msgID[:]...), body...)
	env, err := s.Encrypt(frame)
	require.NoError(t, err)
	raw, err := env.MarshalBinary()
	require.NoError(t, err)
	return raw
}

// TestPrekeyChangesConcurrentWithReceive: initiations are answered while
// the signed prekey rotates and one-time prekeys are replenished. Each
// answer and each change works on the prekeys as the previous one stored
// them (all under the send mutex), so no rotation or replenishment is
// overwritten by an answer made from an older copy: after a restart, an
// initiation made with every bundle published meanwhile (its signed
// prekey, retired or current, and its one-time prekey) is answered.
func TestPrekeyChangesConcurrentWithReceive(t *testing.T) {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	b := mustOpen(t, net, bob)
	var envs [][]byte
	for i := range 24 { // the first 5 get a one-time prekey each
		bb, err := net.Fetch(ctx, bob)
		require.NoError(t, err)
		envs = append(envs, rawInitiation(t, store.DeviceAddress{UserID: "early", DeviceID: int64(i)}, bb, "early"))
	}
	var (
		wg      sync.WaitGroup
		bundles []session.Bundle
	)
	for _, env := range envs {
		wg.Go(func() {
			_, err := b.c.Receive(ctx, env)
			assert.NoError(t, err)
		})
	}
	wg.Go(func() {
		for range 10 {
			assert.NoError(t, b.c.RotateSignedPrekey(ctx))
			_, err := b.c.ReplenishPrekeys(ctx)
			assert.NoError(t, err)
			bb, err := net.Fetch(ctx, bob)
			assert.NoError(t, err)
			bundles = append(bundles, bb)
		}
	})
	wg.Wait()

	b.reopen()
	for i, bb := range bundles {
		_, err := b.c.Receive(ctx, rawInitiation(t, store.DeviceAddress{UserID: "late", DeviceID: int64(i)}, bb, "late"))
		require.NoError(t, err, "bundle %d (signed prekey %d, %d one-time prekeys)", i, bb.SignedPrekeyID, len(bb.OneTimePrekeys))
	}
}

// lyingDirectory is the network's directory with a prekey count it makes
// up.
type lyingDirectory struct {
	*transporttest.Network
	count int
}

func (l lyingDirectory) OneTimePrekeyCount(context.Context, store.DeviceAddress) (int, error) {
	return l.count, nil
}

// TestReplenishRefusesImpossibleCount: a negative one-time prekey count
// from the directory is refused with ErrDirectoryAnswer before anything
// is generated: no row changes, nothing is published, and the prekeys
// held are still the ones answered.
func TestReplenishRefusesImpossibleCount(t *testing.T) {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	b := mustOpen(t, net, bob)
	bundle, err := net.Fetch(ctx, bob) // names a one-time prekey bob holds
	require.NoError(t, err)
	require.Len(t, bundle.OneTimePrekeys, 1)
	cfg := b.config()
	cfg.Directory = lyingDirectory{Network: net, count: -995}
	b.restartWith(cfg)

	before := dumpTables(t, sqliteaccess.DB(b.sql))
	net.ResetCalls()
	added, err := b.c.ReplenishPrekeys(ctx)
	require.ErrorIs(t, err, client.ErrDirectoryAnswer)
	require.Zero(t, added)
	require.Equal(t, before, dumpTables(t, sqliteaccess.DB(b.sql)), "no row changes")
	require.Empty(t, net.Calls(), "nothing published")

	res, err := b.c.Receive(ctx, rawInitiation(t, alice, bundle, "still held"))
	require.NoError(t, err)
	require.Equal(t, "still held", string(res.(*client.Message).Plaintext))
}

// TestReplenishAboveThresholdPublishesNothing: above the threshold,
// ReplenishPrekeys adds nothing and publishes nothing; it stores the
// prekeys only when a retired signed prekey's grace period is over (the
// bundle, which shows no retired key, is the same), and otherwise changes
// no row.
func TestReplenishAboveThresholdPublishesNothing(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	net := transporttest.NewNetwork()
	b := mustOpen(t, net, bob)
	b.withClock(clk)
	require.NoError(t, b.c.RotateSignedPrekey(ctx))
	clk.advance(2 * testGrace)

	ops := func() []string {
		var out []string
		for _, c := range net.Calls() {
			out = append(out, c.Op)
		}
		return out
	}
	before := dumpTables(t, sqliteaccess.DB(b.sql))
	net.ResetCalls()
	added, err := b.c.ReplenishPrekeys(ctx)
	require.NoError(t, err)
	require.Zero(t, added)
	require.Equal(t, []string{transporttest.OpCount}, ops(), "expired retired key: stored, not published")
	expired := dumpTables(t, sqliteaccess.DB(b.sql))
	require.NotEqual(t, before, expired, "the expired retired key is dropped from the stored prekeys")

	net.ResetCalls()
	added, err = b.c.ReplenishPrekeys(ctx)
	require.NoError(t, err)
	require.Zero(t, added)
	require.Equal(t, []string{transporttest.OpCount}, ops())
	require.Equal(t, expired, dumpTables(t, sqliteaccess.DB(b.sql)), "nothing to do: no row changes")
}

// TestNewRefusesBadPrekeySettings: a threshold that replenishment could
// never reach or a negative grace period is refused by New, not by the
// first ReplenishPrekeys or RotateSignedPrekey.
func TestNewRefusesBadPrekeySettings(t *testing.T) {
	net := transporttest.NewNetwork()
	d := mustOpen(t, net, bob)
	require.NoError(t, d.c.Close()) // each New below claims the store
	tests := []struct {
		name   string
		change func(*client.Config)
		ok     bool
	}{
		{"defaults", func(*client.Config) {}, true},
		{"threshold at the count", func(c *client.Config) { c.OneTimePrekeyThreshold = c.OneTimePrekeys }, true},
		{"threshold above the count", func(c *client.Config) { c.OneTimePrekeyThreshold = c.OneTimePrekeys + 1 }, false},
		{"negative threshold", func(c *client.Config) { c.OneTimePrekeyThreshold = -1 }, false},
		{"negative grace", func(c *client.Config) { c.SignedPrekeyGrace = -time.Second }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := d.config()
			tt.change(&cfg)
			c, err := client.Open(context.Background(), cfg)
			if tt.ok {
				require.NoError(t, err)
				require.NoError(t, c.Close())
				return
			}
			require.ErrorIs(t, err, store.ErrInvalidArgument)
		})
	}
}
