package client_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"math/big"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
)

// TestDiscardedPinIdentityCannotSign: the signing key of the identity a
// discarded pin trusts decodes to no Ed25519 point, so no signature
// verifies under it, whoever made it.
func TestDiscardedPinIdentityCannotSign(t *testing.T) {
	key := client.DiscardedPinIdentity.SigningKey
	require.False(t, isEd25519Point(key[:]), "the placeholder's signing key names a point")
	require.True(t, client.PinDiscarded(client.DiscardedPinIdentity))
	for range 64 {
		sig := make([]byte, ed25519.SignatureSize)
		_, err := rand.Read(sig)
		require.NoError(t, err)
		require.False(t, ed25519.Verify(key[:], []byte("a bundle"), sig))
	}
}

// TestIsEd25519Point: the decoding check accepts real public keys and
// the base point, and refuses what RFC 8032 refuses.
func TestIsEd25519Point(t *testing.T) {
	for range 16 {
		pub, _, err := ed25519.GenerateKey(rand.Reader)
		require.NoError(t, err)
		require.True(t, isEd25519Point(pub))
	}
	base := make([]byte, 32)
	base[0] = 0x58
	for i := 1; i < 32; i++ {
		base[i] = 0x66
	}
	require.True(t, isEd25519Point(base), "the base point")
	nonCanonical := slices.Repeat([]byte{0xff}, 32)
	nonCanonical[31] = 0x7f // y = 2^255 - 1, not below p
	require.False(t, isEd25519Point(nonCanonical))
}

// isEd25519Point reports whether b is the encoding of a point of
// edwards25519 (RFC 8032, 5.1.3): y below p, and (y²-1)/(dy²+1) a square
// whose root is not zero if the sign bit is set.
func isEd25519Point(b []byte) bool {
	p := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	le := slices.Clone(b)
	sign := le[31] >> 7
	le[31] &= 0x7f
	slices.Reverse(le)
	y := new(big.Int).SetBytes(le)
	if y.Cmp(p) >= 0 {
		return false
	}
	// d = -121665 / 121666 mod p.
	d := new(big.Int).Mul(big.NewInt(-121665), new(big.Int).ModInverse(big.NewInt(121666), p))
	d.Mod(d, p)
	y2 := new(big.Int).Mul(y, y)
	u := new(big.Int).Sub(y2, big.NewInt(1))
	u.Mod(u, p)
	v := new(big.Int).Mul(d, y2)
	v.Add(v, big.NewInt(1)).Mod(v, p)
	x2 := new(big.Int).Mul(u, new(big.Int).ModInverse(v, p))
	x2.Mod(x2, p)
	if x2.Sign() == 0 {
		return sign == 0
	}
	// Euler's criterion: x2 is a square if x2^((p-1)/2) is 1.
	e := new(big.Int).Rsh(new(big.Int).Sub(p, big.NewInt(1)), 1)
	return new(big.Int).Exp(x2, e, p).Cmp(big.NewInt(1)) == 0
}
