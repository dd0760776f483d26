package session

import (
	"crypto/rand"
	"testing"

	"github.com/securemsg/storage/store"
	"github.com/stretchr/testify/require"
)

// TestFirstChainMustAnswerTheSignedPrekey: an initiation whose ratchet
// header answers another key than the signed prekey it names is refused
// with ErrDecrypt even when it authenticates (the header is associated
// data, so only a sender holding the keys can make one), and consumes no
// prekey. The public API cannot make such an envelope: it is built by
// changing the key an initiator's first chain answers after Initiate.
func TestFirstChainMustAnswerTheSignedPrekey(t *testing.T) {
	alice := store.DeviceAddress{UserID: "alice", DeviceID: 1}
	bob := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	aliceID, err := GenerateIdentity(rand.Reader)
	require.NoError(t, err)
	bobID, err := GenerateIdentity(rand.Reader)
	require.NoError(t, err)
	bobPK, err := NewPrekeys(rand.Reader, bobID, 1)
	require.NoError(t, err)
	other, err := generateKeyPair(rand.Reader)
	require.NoError(t, err)

	tests := []struct {
		name    string
		answers func(b Bundle) [KeySize]byte
		ok      bool
	}{
		{"the signed prekey", func(b Bundle) [KeySize]byte { return b.SignedPrekey }, true},
		{"another key", func(Bundle) [KeySize]byte { return other.pub }, false},
		{"the identity key", func(b Bundle) [KeySize]byte { return b.Identity.DHKey }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bobPK.Bundle(bob)
			as, err := Initiate(rand.Reader, aliceID, alice, b)
			require.NoError(t, err)
			as.dhr = tt.answers(b) // the sending chain was derived already
			env, err := as.Encrypt([]byte("first"))
			require.NoError(t, err)
			require.Equal(t, tt.answers(b), env.Header.Answers)
			pk := bobPK.clone()
			_, pt, err := Respond(bobID, bob, pk, env)
			if tt.ok {
				require.NoError(t, err)
				require.Equal(t, "first", string(pt))
				return
			}
			require.ErrorIs(t, err, ErrDecrypt)
			require.Equal(t, bobPK.oneTime, pk.oneTime, "no one-time prekey consumed")
		})
	}
}
