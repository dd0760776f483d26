package client_test

import (
	"context"
	"crypto/rand"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

// authenticInitiation is an initiation to device to, claiming from's
// address, from an identity the caller made: it authenticates, since its
// maker holds the keys it names.
func authenticInitiation(t *testing.T, d *device, from, to store.DeviceAddress, identity *session.Identity) []byte {
	t.Helper()
	bundle, err := d.net.Fetch(context.Background(), to)
	require.NoError(t, err)
	s, err := session.Initiate(rand.Reader, identity, from, bundle)
	require.NoError(t, err)
	env, err := s.Encrypt(client.MessageFrame(store.NewLogicalMessageID(), []byte("forged")))
	require.NoError(t, err)
	raw, err := env.MarshalBinary()
	require.NoError(t, err)
	return raw
}

// Initiations claiming alice's address from identities an attacker made
// authenticate, and the pin refuses them (ErrIdentityChanged). The first
// from an identity records it as alice's change; each later one from it
// changes nothing, and is tried on bob's cached state of alice without
// reading or opening her record again (the keyring counts every open),
// as is one from yet another identity, whose change is stored. So a
// stream of them costs no reload of a record of up to 300 KB each.
// Declining the recorded change lets the conversation go on.
func TestForgedInitiationFromOwnKeysKeepsPeerCache(t *testing.T) {
	ctx := context.Background()
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			_, a, b := openPair(t, kind)
			converse(t, a, b)
			newIdentity := func() *session.Identity {
				id, err := session.GenerateIdentity(rand.Reader)
				require.NoError(t, err)
				return id
			}
			x, y := newIdentity(), newIdentity()

			_, err := b.c.Receive(ctx, authenticInitiation(t, b, alice, bob, x))
			require.ErrorIs(t, err, session.ErrIdentityChanged)
			require.True(t, b.recordedChange(alice).Equal(x.Public()))

			for i := range 3 {
				before := storeSnapshot(t, b, alice)
				opened := b.spy.Opens()
				_, err := b.c.Receive(ctx, authenticInitiation(t, b, alice, bob, x))
				require.ErrorIs(t, err, session.ErrIdentityChanged)
				require.Equal(t, opened, b.spy.Opens(), "initiation %d was tried on the cached state", i)
				require.Equal(t, before, storeSnapshot(t, b, alice), "initiation %d changed nothing", i)
			}

			opened := b.spy.Opens()
			_, err = b.c.Receive(ctx, authenticInitiation(t, b, alice, bob, y))
			require.ErrorIs(t, err, session.ErrIdentityChanged)
			require.Equal(t, opened, b.spy.Opens(), "a new identity's initiation was tried on the cached state")
			require.True(t, b.recordedChange(alice).Equal(y.Public()), "and its change stored")

			var changed *session.IdentityChangedError
			require.True(t, errors.As(err, &changed))
			require.NoError(t, b.c.DeclineRemoteIdentityChange(ctx, alice, changed.Observed))
			converse(t, a, b)
		})
	}
}

// savePeerFailingStore fails the next SavePeer once fail is set.
type savePeerFailingStore struct {
	store.Store
	fail atomic.Bool
}

func (s *savePeerFailingStore) SavePeer(ctx context.Context, peer store.DeviceAddress, u store.PeerState) error {
	if s.fail.CompareAndSwap(true, false) {
		return errStoreBroken
	}
	return s.Store.SavePeer(ctx, peer, u)
}

// An identity change the store failed to record is not kept in the
// client's cached state either: the initiation's error says both, the
// stored pin records no change, and alice's next message is received
// (a change held in memory only would refuse it).
func TestUnstoredIdentityChangeIsNotCached(t *testing.T) {
	ctx := context.Background()
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			_, a, b := openPair(t, kind)
			converse(t, a, b)
			fs := &savePeerFailingStore{Store: b.st}
			require.NoError(t, b.c.Close())
			cfg := b.config()
			cfg.Store = fs
			c, err := client.Open(ctx, cfg)
			require.NoError(t, err)
			b.c = c

			x, err := session.GenerateIdentity(rand.Reader)
			require.NoError(t, err)
			fs.fail.Store(true)
			_, err = b.c.Receive(ctx, authenticInitiation(t, b, alice, bob, x))
			require.ErrorIs(t, err, session.ErrIdentityChanged)
			require.ErrorIs(t, err, errStoreBroken)
			require.Nil(t, b.storedPin(alice).Changed)
			converse(t, a, b)
		})
	}
}
