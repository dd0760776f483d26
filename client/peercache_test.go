package client_test

import (
	"context"
	"crypto/rand"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/store"

	"github.com/securemsg/storage/session"
)

// commitFailingStore fails the next CommitReceived once fail is set, as a
// full disk or a lost connection would, after the envelope decrypted.
type commitFailingStore struct {
	store.Store
	fail atomic.Bool
}

func (s *commitFailingStore) CommitReceived(ctx context.Context, peer store.DeviceAddress, id store.LogicalMessageID, plaintext []byte, in store.Inbound) (store.Received, error) {
	if s.fail.CompareAndSwap(true, false) {
		return store.Received{}, errStoreBroken
	}
	return s.Store.CommitReceived(ctx, peer, id, plaintext, in)
}

// takeMailbox removes and returns the envelopes waiting for addr.
func takeMailbox(t *testing.T, d *device, addr store.DeviceAddress) [][]byte {
	t.Helper()
	envs, err := d.net.Receive(context.Background(), addr)
	require.NoError(t, err)
	return envs
}

// A failed envelope that changed nothing (forged, replayed) leaves the
// client's cached state of its sender in place: the next envelope is
// tried on it without reading or opening anything in the store, so a
// stream of forgeries does not make the client reload and decode the
// sender's record (up to 300 KB) for each. The keyring counts every open:
// it does not move across the forgery and the genuine message after it,
// which is delivered and acknowledged, and the conversation goes on both
// ways.
func TestForgedEnvelopeKeepsPeerCache(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name  string
		forge func(t *testing.T, a, b *device, genuine []byte) []byte
		want  error
	}{
		{"forged ciphertext", func(t *testing.T, _, _ *device, genuine []byte) []byte {
			env, err := session.UnmarshalEnvelope(genuine)
			require.NoError(t, err)
			_, err = rand.Read(env.Ciphertext)
			require.NoError(t, err)
			raw, err := env.MarshalBinary()
			require.NoError(t, err)
			return raw
		}, session.ErrDecrypt},
		{"forged initiation", func(t *testing.T, a, b *device, _ []byte) []byte {
			bundle, err := b.net.Fetch(ctx, bob)
			require.NoError(t, err)
			return forgedInitiation(t, alice, bob, randomIdentity(t), bundle)
		}, session.ErrDecrypt},
		{"replayed envelope", func(t *testing.T, a, b *device, _ []byte) []byte {
			a.send(bob, "delivered before")
			envs := takeMailbox(t, b, bob)
			require.Len(t, envs, 1)
			r, err := b.c.Receive(ctx, envs[0])
			require.NoError(t, err)
			require.IsType(t, &client.Message{}, r)
			finalize(t, b.c, []client.ReceiveResult{r})
			require.Len(t, acks(a.poll()), 1)
			return envs[0]
		}, session.ErrReplay},
	} {
		for _, kind := range bothStores {
			t.Run(tt.name+"/"+string(kind), func(t *testing.T) {
				_, a, b := openPair(t, kind)
				converse(t, a, b) // bob's client holds alice's state
				a.send(bob, "genuine")
				genuine := takeMailbox(t, b, bob)
				require.Len(t, genuine, 1)
				forged := tt.forge(t, a, b, genuine[0])
				before := storeSnapshot(t, b, alice)

				opened := b.spy.Opens()
				_, err := b.c.Receive(ctx, forged)
				require.Error(t, err)
				if tt.want != nil {
					require.ErrorIs(t, err, tt.want)
				}
				require.Equal(t, opened, b.spy.Opens(), "the failed envelope was tried on the cached state")
				require.Equal(t, before, storeSnapshot(t, b, alice), "a failed envelope changes nothing")

				opened = b.spy.Opens()
				r, err := b.c.Receive(ctx, genuine[0])
				require.NoError(t, err)
				require.Equal(t, "genuine", string(r.(*client.Message).Plaintext))
				require.Equal(t, opened, b.spy.Opens(), "the genuine message was received on the cached state: nothing reopened")
				finalize(t, b.c, []client.ReceiveResult{r})
				require.Len(t, acks(a.poll()), 1)
				require.Zero(t, a.count(&bob))
				converse(t, a, b)
			})
		}
	}
}

// A failure after the envelope decrypted (here the commit of the message)
// leaves the cached state advanced past what the store holds: it is
// dropped, and the same envelope delivered again is received from the
// stored state, once, as a new message; for a first contact the
// session and the pin the initiation would have made are not kept either.
// Were the advanced state kept, the redelivery would fail as a replay and
// the message would be lost.
func TestFailedCommitReloadsPeerState(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name  string
		first bool // the envelope is the sender's initiation
	}{
		{"session", false},
		{"first contact", true},
	} {
		for _, kind := range bothStores {
			t.Run(tt.name+"/"+string(kind), func(t *testing.T) {
				net, a, b := openPair(t, kind)
				if !tt.first {
					converse(t, a, b)
				}
				fs := &commitFailingStore{Store: b.st}
				require.NoError(t, b.c.Close())
				cfg := b.config()
				cfg.Store = fs
				c, err := client.Open(ctx, cfg)
				require.NoError(t, err)
				b.c = c

				a.send(bob, "kept pending")
				envs := takeMailbox(t, b, bob)
				require.Len(t, envs, 1)
				before := storeSnapshot(t, b, alice)
				fs.fail.Store(true)
				_, err = b.c.Receive(ctx, envs[0])
				require.ErrorIs(t, err, errStoreBroken)
				require.Equal(t, before, storeSnapshot(t, b, alice), "the failed commit stored nothing")
				require.Zero(t, net.Pending(alice), "no ACK for a message not stored")

				opened := b.spy.Opens()
				r, err := b.c.Receive(ctx, envs[0])
				require.NoError(t, err, "the redelivered envelope is received from the stored state")
				require.Equal(t, "kept pending", string(r.(*client.Message).Plaintext))
				if !tt.first {
					require.Greater(t, b.spy.Opens(), opened, "the state was reloaded from the store")
				}
				finalize(t, b.c, []client.ReceiveResult{r})
				require.Len(t, acks(a.poll()), 1)
				require.Zero(t, a.count(&bob))
				converse(t, a, b)
			})
		}
	}
}
