package session_test

import (
	"bytes"
	"crypto/rand"
	mrand "math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/session"
)

func TestUnmarshalStateRejectsGarbage(t *testing.T) {
	alice, bob, as, bs := confirmed(t)
	// Give bob skipped keys and previous ratchet keys so every section of
	// the encoding is non-empty.
	e0 := encrypt(t, as, "0")
	decrypt(t, bs, encrypt(t, as, "1"), "1")

	sess := stateOf(t, bs)
	// alice starts over: bob's state, with its skipped key, is archived
	// (version 4).
	again, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
	require.NoError(t, err)
	archived := stateOf(t, receive(t, bob, bs, encrypt(t, again, "again")).Session)
	require.Equal(t, byte(4), archived[4])
	id, err := alice.id.MarshalBinary()
	require.NoError(t, err)
	pk, err := bob.pk.MarshalBinary()
	require.NoError(t, err)
	pubID, err := alice.id.Public().MarshalBinary()
	require.NoError(t, err)
	pin := session.NewPin(bob.addr, bob.id.Public())
	changed := alice.id.Public()
	pin.Changed = &changed
	pinBytes, err := pin.MarshalBinary()
	require.NoError(t, err)

	decoders := []struct {
		name   string
		valid  []byte
		decode func([]byte) error
	}{
		{"session", sess, func(b []byte) error { _, err := session.UnmarshalSession(b); return err }},
		{"retired session", stateOf(t, bs.Retire()), func(b []byte) error { _, err := session.UnmarshalSession(b); return err }},
		{"session with archived skipped keys", archived, func(b []byte) error { _, err := session.UnmarshalSession(b); return err }},
		{"identity", id, func(b []byte) error { _, err := session.UnmarshalIdentity(b); return err }},
		{"public identity", pubID, func(b []byte) error { _, err := session.UnmarshalPublicIdentity(b); return err }},
		{"prekeys", pk, func(b []byte) error { _, err := session.UnmarshalPrekeys(b); return err }},
		{"pin", pinBytes, func(b []byte) error { _, err := session.UnmarshalPin(b); return err }},
	}
	rng := mrand.New(mrand.NewPCG(3, 4))
	for _, d := range decoders {
		t.Run(d.name, func(t *testing.T) {
			require.NoError(t, d.decode(d.valid))
			for n := range len(d.valid) {
				require.ErrorIs(t, d.decode(d.valid[:n]), session.ErrMalformedState, "prefix %d", n)
			}
			require.ErrorIs(t, d.decode(append(bytes.Clone(d.valid), 0)), session.ErrMalformedState, "trailing byte")
			for range 500 {
				b := make([]byte, rng.IntN(2*len(d.valid)))
				for i := range b {
					b[i] = byte(rng.Uint32())
				}
				require.ErrorIs(t, d.decode(b), session.ErrMalformedState)
			}
			// Single byte changes never panic (most are rejected; key bytes
			// cannot be checked).
			for i := range d.valid {
				b := bytes.Clone(d.valid)
				b[i] ^= 0xFF
				_ = d.decode(b)
			}
		})
	}

	restored, err := session.UnmarshalSession(sess)
	require.NoError(t, err)
	decrypt(t, restored, e0, "0")
}

func FuzzUnmarshalSession(f *testing.F) {
	alice, bob, as, bs := confirmed(f)
	_ = encrypt(f, as, "skip")
	env := encrypt(f, as, "x")
	pt, err := bs.Decrypt(env)
	require.NoError(f, err)
	require.Equal(f, "x", string(pt))
	again, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
	require.NoError(f, err)
	f.Add(stateOf(f, as))
	f.Add(stateOf(f, bs))
	f.Add(stateOf(f, bs.Retire()))
	f.Add(stateOf(f, receive(f, bob, bs, encrypt(f, again, "again")).Session)) // version 4
	f.Add([]byte("SMSS\x01"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := session.UnmarshalSession(in)
		if err != nil {
			require.ErrorIs(t, err, session.ErrMalformedState)
			return
		}
		out, err := s.MarshalBinary()
		require.NoError(t, err)
		if in[4] < out[4] {
			// An earlier version is written again as the one that
			// encodes the record now (trimmed if it held more archived
			// skipped keys than MaxArchivedSkippedKeys); that is stable.
			again, err := session.UnmarshalSession(out)
			require.NoError(t, err)
			_, archived := again.SkippedKeys()
			require.LessOrEqual(t, archived, session.MaxArchivedSkippedKeys)
			require.Equal(t, out, stateOf(t, again))
			return
		}
		require.Equal(t, in, out)
	})
}
