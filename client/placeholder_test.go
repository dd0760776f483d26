package client_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"

	"filippo.io/edwards25519"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
)

// TestDiscardedPinIdentityCannotSign: the signing key of the identity a
// discarded pin trusts decodes to no Ed25519 point, so no signature
// verifies under it, whoever made it.
func TestDiscardedPinIdentityCannotSign(t *testing.T) {
	key := client.DiscardedPinIdentity.SigningKey
	_, err := new(edwards25519.Point).SetBytes(key[:])
	require.Error(t, err, "the placeholder's signing key names a point")
	require.True(t, client.PinDiscarded(client.DiscardedPinIdentity))
	for range 64 {
		sig := make([]byte, ed25519.SignatureSize)
		_, err := rand.Read(sig)
		require.NoError(t, err)
		require.False(t, ed25519.Verify(key[:], []byte("a bundle"), sig))
	}
}
