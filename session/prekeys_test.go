package session_test

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

// TestBundleSignatureCoversIdentityKeys: replacing either identity key of
// a bundle, or its signed prekey or id, breaks the signature.
func TestBundleSignatureCoversIdentityKeys(t *testing.T) {
	bob := newDevice(t, "bob", 1, 1)
	other := newDevice(t, "eve", 1, 0)
	tests := []struct {
		name   string
		change func(*session.Bundle)
	}{
		{"X25519 identity key", func(b *session.Bundle) { b.Identity.DHKey = other.id.Public().DHKey }},
		{"signed prekey", func(b *session.Bundle) { b.SignedPrekey[0] ^= 1 }},
		{"signed prekey id", func(b *session.Bundle) { b.SignedPrekeyID++ }},
	}
	require.NoError(t, bob.bundle().Verify())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bob.bundle().Clone()
			tt.change(&b)
			require.ErrorIs(t, b.Verify(), session.ErrBadSignature)
		})
	}
}

// TestRotateSignedPrekey: after a rotation an initiation naming the
// previous signed prekey is answered until the grace period ends, then
// refused with ErrUnknownPrekey; the retired keys survive encoding and are
// bounded; rotating needs the owner's identity.
func TestRotateSignedPrekey(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const grace = time.Hour
	alice := newDevice(t, "alice", 1, 0)
	bob := newDevice(t, "bob", 1, 0)
	oldBundle := bob.bundle()
	bob2 := newDevice(t, "bob", 2, 0)
	require.ErrorIs(t, bob.pk.Rotate(rand.Reader, bob2.id, t0, grace), store.ErrInvalidArgument)
	require.ErrorIs(t, bob.pk.Rotate(rand.Reader, bob.id, t0, -grace), store.ErrInvalidArgument)
	require.NoError(t, bob.pk.Rotate(rand.Reader, bob.id, t0, grace))
	require.NotEqual(t, oldBundle.SignedPrekeyID, bob.pk.SignedPrekeyID())
	require.Equal(t, 1, bob.pk.RetiredSignedPrekeys())
	b, err := bob.pk.MarshalBinary()
	require.NoError(t, err)
	bob.pk, err = session.UnmarshalPrekeys(b)
	require.NoError(t, err)
	require.Equal(t, 1, bob.pk.RetiredSignedPrekeys())

	initiate := func() session.Envelope {
		s, err := session.Initiate(rand.Reader, alice.id, alice.addr, oldBundle)
		require.NoError(t, err)
		return encrypt(t, s, "old bundle")
	}
	local := func(now time.Time) session.Local {
		return session.Local{Identity: bob.id, Address: bob.addr, Prekeys: bob.pk, Now: now}
	}
	r, err := session.Receive(local(t0.Add(grace-time.Second)), nil, initiate())
	require.NoError(t, err)
	require.Equal(t, "old bundle", string(r.Plaintext))
	require.Equal(t, 1, r.Prekeys.RetiredSignedPrekeys())
	_, err = session.Receive(local(t0.Add(grace)), nil, initiate())
	require.ErrorIs(t, err, session.ErrUnknownPrekey)
	require.Equal(t, 1, bob.pk.RetiredSignedPrekeys(), "Receive does not change the prekeys it is given")

	// The new bundle works; Expire drops the retired key at its end.
	s, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
	require.NoError(t, err)
	r, err = session.Receive(local(t0.Add(2*grace)), nil, encrypt(t, s, "new"))
	require.NoError(t, err)
	require.Zero(t, r.Prekeys.RetiredSignedPrekeys(), "expired keys are dropped with the answer")
	require.False(t, bob.pk.Expire(t0))
	require.True(t, bob.pk.Expire(t0.Add(grace)))
	require.Zero(t, bob.pk.RetiredSignedPrekeys())

	for i := range session.MaxRetiredSignedPrekeys + 3 {
		require.NoError(t, bob.pk.Rotate(rand.Reader, bob.id, t0.Add(time.Duration(i)*time.Second), grace))
	}
	require.Equal(t, session.MaxRetiredSignedPrekeys, bob.pk.RetiredSignedPrekeys())
	b, err = bob.pk.MarshalBinary()
	require.NoError(t, err)
	_, err = session.UnmarshalPrekeys(b)
	require.NoError(t, err)
}

// TestReplenishEvictsOldest: Replenish adds fresh one-time prekeys and,
// at the cap, drops the oldest held ones, which are then refused.
func TestReplenishEvictsOldest(t *testing.T) {
	alice := newDevice(t, "alice", 1, 0)
	bob := newDevice(t, "bob", 1, 2)
	oldest := bob.bundle() // offers one-time prekey 1
	keys, err := bob.pk.Replenish(rand.Reader, 3)
	require.NoError(t, err)
	require.Len(t, keys, 3)
	require.Equal(t, uint32(3), keys[0].ID)
	require.Equal(t, 5, bob.pk.OneTimeCount())
	_, err = bob.pk.Replenish(rand.Reader, session.MaxOneTimePrekeys+1)
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	require.Equal(t, 5, bob.pk.OneTimeCount(), "unchanged on error")

	keys, err = bob.pk.Replenish(rand.Reader, session.MaxOneTimePrekeys-1)
	require.NoError(t, err)
	require.Len(t, keys, session.MaxOneTimePrekeys-1)
	require.Equal(t, session.MaxOneTimePrekeys, bob.pk.OneTimeCount())
	s, err := session.Initiate(rand.Reader, alice.id, alice.addr, oldest)
	require.NoError(t, err)
	_, err = session.Receive(session.Local{Identity: bob.id, Address: bob.addr, Prekeys: bob.pk}, nil, encrypt(t, s, "evicted"))
	require.ErrorIs(t, err, session.ErrUnknownPrekey)
}
