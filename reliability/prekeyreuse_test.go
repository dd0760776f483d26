package reliability_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport"
	"github.com/securemsg/storage/transport/transporttest"
)

// replayDirectory is a dishonest directory: it hands every fetcher of a
// device the bundle it handed the first one, one-time prekey included.
type replayDirectory struct {
	transport.Directory
	mu   sync.Mutex
	seen map[store.DeviceAddress]session.Bundle
}

func (d *replayDirectory) Fetch(ctx context.Context, addr store.DeviceAddress) (session.Bundle, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if b, ok := d.seen[addr]; ok {
		return b, nil
	}
	b, err := d.Directory.Fetch(ctx, addr)
	if err == nil {
		d.seen[addr] = b
	}
	return b, err
}

// TestFaultLostCommitKeepsPrekeyUsedUp: a commit that reaches the disk and
// still reports an error (an I/O error after the WAL frame was written)
// used up the one-time prekey in the store. The client must not keep
// answering initiations with it from memory, nor write it back with the
// next change of its prekeys: a second initiation naming the same
// one-time prekey (a dishonest directory handed it out twice) is refused,
// in the same process and after a restart.
func TestFaultLostCommitKeepsPrekeyUsedUp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		then    func(t *testing.T, net *transporttest.Network, a *device)
		restart bool
	}{
		{name: "nothing"},
		{name: "nothing, restart", restart: true},
		{name: "another initiation", then: anotherInitiation},
		{name: "another initiation, restart", then: anotherInitiation, restart: true},
		{name: "rotation, restart", then: func(t *testing.T, _ *transporttest.Network, a *device) {
			require.NoError(t, a.c.RotateSignedPrekey(context.Background()))
		}, restart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			net := transporttest.NewNetwork()
			inj := &injector{}
			drv := registerFaultDriver(t, inj)
			a := sqliteDevice(t, net, alice, drv)
			dir := &replayDirectory{Directory: net, seen: map[store.DeviceAddress]session.Bundle{}}
			b := memDeviceWith(t, net, dir, bob)
			c := memDeviceWith(t, net, dir, carol)

			_, err := b.c.Send(ctx, alice, []byte("from bob"))
			require.NoError(t, err)
			fromBob, err := net.Receive(ctx, alice)
			require.NoError(t, err)
			require.Len(t, fromBob, 1)
			_, err = c.c.Send(ctx, alice, []byte("from carol, on bob's one-time prekey"))
			require.NoError(t, err)
			fromCarol, err := net.Receive(ctx, alice)
			require.NoError(t, err)
			require.Len(t, fromCarol, 1)

			inj.fail(fault{Op: opCommitLost, Match: sqlInsertInbound})
			_, err = a.c.Receive(ctx, fromBob[0])
			require.ErrorIs(t, err, errInjected)
			require.Equal(t, 1, inj.reset())

			if tc.then != nil {
				tc.then(t, net, a)
			}
			if tc.restart {
				a.reopen(t, net, drv)
			}
			_, err = a.c.Receive(ctx, fromCarol[0])
			require.ErrorIs(t, err, session.ErrUnknownPrekey, "a one-time prekey answers one initiation only")
			// Bob's initiation and message were stored: its retry is given
			// by the pending inbound row the lost commit wrote.
			_, err = b.c.RetryPendingMessages(ctx, alice)
			require.NoError(t, err)
			res, err := a.c.Poll(ctx)
			require.NoError(t, err)
			require.Len(t, res, 1)
			m := res[0].(*client.Message)
			require.True(t, m.Again)
			require.Equal(t, "from bob", string(m.Plaintext))
		})
	}
}

// anotherInitiation has dave start a session with alice, which uses up
// another one-time prekey and commits alice's prekeys again.
func anotherInitiation(t *testing.T, net *transporttest.Network, a *device) {
	ctx := context.Background()
	d := memDevice(t, net, store.DeviceAddress{UserID: "dave", DeviceID: 2})
	_, err := d.c.Send(ctx, alice, []byte("from dave"))
	require.NoError(t, err)
	res, err := a.c.Poll(ctx)
	require.NoError(t, err)
	require.Len(t, res, 1)
}

// publishLog is a directory that keeps the last bundle published for each
// device.
type publishLog struct {
	transport.Directory
	mu   sync.Mutex
	last map[store.DeviceAddress]session.Bundle
}

func (d *publishLog) Publish(ctx context.Context, b session.Bundle) error {
	d.mu.Lock()
	d.last[b.Address] = b.Clone()
	d.mu.Unlock()
	return d.Directory.Publish(ctx, b)
}

// TestFaultLostCommitPublishesStoredPrekeys: after a commit that
// used up a one-time prekey reached the disk and still failed,
// PublishBundle publishes the
// prekeys the store holds, not the ones in memory: the used-up one-time
// prekey is not offered again.
func TestFaultLostCommitPublishesStoredPrekeys(t *testing.T) {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	inj := &injector{}
	drv := registerFaultDriver(t, inj)
	a := sqliteDevice(t, net, alice, drv)
	// Alice's client again, over a directory that shows what it publishes.
	pub := &publishLog{Directory: net, last: map[store.DeviceAddress]session.Bundle{}}
	require.NoError(t, a.c.Close())
	var err error
	a.c, err = client.Open(ctx, client.Config{Store: a.store, Transport: net, Directory: pub})
	require.NoError(t, err)
	b := memDevice(t, net, bob)

	_, err = b.c.Send(ctx, alice, []byte("from bob"))
	require.NoError(t, err)
	fromBob, err := net.Receive(ctx, alice)
	require.NoError(t, err)
	require.Len(t, fromBob, 1)
	env, err := session.UnmarshalEnvelope(fromBob[0])
	require.NoError(t, err)
	require.NotNil(t, env.Initiation)
	require.True(t, env.Initiation.HasOneTimePrekey)
	used := env.Initiation.OneTimePrekeyID

	inj.fail(fault{Op: opCommitLost, Match: sqlInsertInbound})
	_, err = a.c.Receive(ctx, fromBob[0])
	require.ErrorIs(t, err, errInjected)
	require.Equal(t, 1, inj.reset())

	require.NoError(t, a.c.PublishBundle(ctx))
	bundle, ok := pub.last[alice]
	require.True(t, ok)
	require.NotEmpty(t, bundle.OneTimePrekeys)
	for _, k := range bundle.OneTimePrekeys {
		require.NotEqual(t, used, k.ID, "the used-up one-time prekey is published again")
	}
}
