package session_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/session"
)

// xor returns a XOR b over their common length.
func xor(a, b []byte) []byte {
	out := make([]byte, min(len(a), len(b)))
	for i := range out {
		out[i] = a[i] ^ b[i]
	}
	return out
}

// TestRolledBackStateDoesNotRepeatKeystream: a session state put back
// (saved, used to encrypt, restored) encrypts a second message under the
// message key of the first. The envelopes share the ratchet header, so
// the key is the same; the nonces differ, so the ciphertexts do not XOR to
// the XOR of the plaintexts, and the receiver still refuses the second as
// a replay of the first's message number.
func TestRolledBackStateDoesNotRepeatKeystream(t *testing.T) {
	for _, tt := range []struct {
		name      string
		confirmed bool // bob answered: no initiation header
	}{
		{"initiating", false},
		{"confirmed", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			alice := newDevice(t, "alice", 1, 3)
			bob := newDevice(t, "bob", 1, 3)
			as, bs := establish(t, alice, bob)
			if tt.confirmed {
				decrypt(t, as, encrypt(t, bs, "hi alice"), "hi alice")
			}
			saved := stateOf(t, as)
			p1, p2 := "attack at dawn, bring the boats", "retreat at noon, burn the maps!"
			require.Len(t, p2, len(p1))

			e1 := encrypt(t, as, p1)
			restored, err := session.UnmarshalSession(saved)
			require.NoError(t, err)
			e2 := encrypt(t, restored, p2)

			require.Equal(t, e1.Header, e2.Header, "the rollback reuses the message number, hence the message key")
			require.NotEqual(t, e1.Nonce, e2.Nonce)
			require.NotEqual(t, xor([]byte(p1), []byte(p2)), xor(e1.Ciphertext, e2.Ciphertext)[:len(p1)],
				"the ciphertexts XOR to the plaintexts' XOR: the keystream was repeated")

			decrypt(t, bs, e1, p1)
			before := stateOf(t, bs)
			_, err = bs.Decrypt(e2)
			require.ErrorIs(t, err, session.ErrReplay)
			require.Equal(t, before, stateOf(t, bs), "a refused envelope changes nothing")
		})
	}
}

// TestEnvelopeNonceIsAuthenticated: a nonce changed in transit fails
// authentication and changes nothing.
func TestEnvelopeNonceIsAuthenticated(t *testing.T) {
	_, _, as, bs := confirmed(t)
	env := encrypt(t, as, "one")
	env.Nonce[0] ^= 1
	before := stateOf(t, bs)
	_, err := bs.Decrypt(env)
	require.ErrorIs(t, err, session.ErrDecrypt)
	require.Equal(t, before, stateOf(t, bs))
	env.Nonce[0] ^= 1
	decrypt(t, bs, env, "one")
}

// TestEncryptDrawsAFreshNonce: each envelope of a chain has its own nonce.
func TestEncryptDrawsAFreshNonce(t *testing.T) {
	_, _, as, _ := confirmed(t)
	seen := map[[session.NonceSize]byte]bool{}
	for i := range 64 {
		env := encrypt(t, as, msg("m", i))
		require.False(t, seen[env.Nonce], "nonce repeated at message %d", i)
		seen[env.Nonce] = true
	}
}
