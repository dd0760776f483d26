package session

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/hkdf"
)

func unhex32(t *testing.T, s string) (out [32]byte) {
	t.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	require.Len(t, b, 32)
	copy(out[:], b)
	return out
}

func hmacSHA256(key []byte, data ...byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(data)
	return m.Sum(nil)
}

func hkdfSHA256(t *testing.T, ikm, salt []byte, info string, n int) []byte {
	t.Helper()
	out := make([]byte, n)
	_, err := io.ReadFull(hkdf.New(sha256.New, ikm, salt, []byte(info)), out)
	require.NoError(t, err)
	return out
}

// Known-answer tests: expected values are computed here straight from the
// spec definitions with crypto/hmac and hkdf, and pinned as hex (checked
// independently with Python's hmac/hashlib RFC 5869 HKDF) so that an
// accidental change of constants or info strings is caught.
func TestKDFChainKnownAnswers(t *testing.T) {
	ck := unhex32(t, "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
	next, mk := kdfCK(ck)
	require.Equal(t, hmacSHA256(ck[:], 0x01), mk[:], "message key = HMAC-SHA256(ck, 0x01)")
	require.Equal(t, hmacSHA256(ck[:], 0x02), next[:], "chain key = HMAC-SHA256(ck, 0x02)")
	require.Equal(t, "9b4c8120a4823a95f47cde17a244f4507244ee6e3957d1fab9fa29b44d3829b7", hex.EncodeToString(mk[:]))
	require.Equal(t, "4304c22c84a53755ab08ead8d97a8d429be5efa480682d7ad1da27f73e1fbe1d", hex.EncodeToString(next[:]))

	// Two steps: the chain is iterated on the chain key only.
	next2, mk2 := kdfCK(next)
	require.Equal(t, hmacSHA256(next[:], 0x01), mk2[:])
	require.Equal(t, hmacSHA256(next[:], 0x02), next2[:])
}

func TestKDFRootKnownAnswers(t *testing.T) {
	rk := unhex32(t, "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf")
	dhOut := unhex32(t, "f0e0d0c0b0a090807060504030201000ffeeddccbbaa99887766554433221100")
	newRK, ck := kdfRK(rk, dhOut[:])
	want := hkdfSHA256(t, dhOut[:], rk[:], "securemsg/session/v1 root chain", 64)
	require.Equal(t, want[:32], newRK[:])
	require.Equal(t, want[32:], ck[:])
	require.Equal(t, "e0d722a3c437ea8ce0c384eee2e55a1e8ae8f319f5372988c0831e5af7454194", hex.EncodeToString(newRK[:]))
	require.Equal(t, "2c5e1431f06e6c8d0a85179e835c6b88f3bad998479c67d3bc21f9ee26ba7d5c", hex.EncodeToString(ck[:]))
}

func TestMessageKeyExpansionKnownAnswer(t *testing.T) {
	mk := unhex32(t, "1111111111111111111111111111111111111111111111111111111111111111")
	key := messageKey(mk)
	want := hkdfSHA256(t, mk[:], make([]byte, 32), "securemsg/session/v2 message key", 32)
	require.Equal(t, want, key[:])
}

func TestX3DHSecretKnownAnswer(t *testing.T) {
	d := func(b byte) []byte {
		out := make([]byte, 32)
		for i := range out {
			out[i] = b
		}
		return out
	}
	ikm := append(d(0xFF), append(append(append(d(1), d(2)...), d(3)...), d(4)...)...)
	want := hkdfSHA256(t, ikm, make([]byte, 32), "securemsg/session/v1 X3DH", 32)
	sk := x3dhSecret(d(1), d(2), d(3), d(4))
	require.Equal(t, want, sk[:])
	require.Equal(t, "10845310f9b9f0bb868aaa230cfd66a9ffc0c974fed144e11859c1bc548224b3", hex.EncodeToString(sk[:]))

	ikm3 := append(d(0xFF), append(append(d(1), d(2)...), d(3)...)...)
	sk3 := x3dhSecret(d(1), d(2), d(3))
	require.Equal(t, hkdfSHA256(t, ikm3, make([]byte, 32), "securemsg/session/v1 X3DH", 32), sk3[:])
}

// hmacByte is HMAC-SHA256 as crypto/hmac computes it, for every one-byte
// message and keys of every shape (zero, all ones, random).
func TestHMACByteIsHMACSHA256(t *testing.T) {
	keys := [][32]byte{{}, unhex32(t, "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff")}
	for range 8 {
		var k [32]byte
		_, err := io.ReadFull(rand.Reader, k[:])
		require.NoError(t, err)
		keys = append(keys, k)
	}
	for _, k := range keys {
		for c := range 256 {
			got := hmacByte(k, byte(c))
			require.Equal(t, hmacSHA256(k[:], byte(c)), got[:], "key %x, byte %d", k, c)
		}
	}
	require.Zero(t, testing.AllocsPerRun(100, func() { hmacByte(keys[2], chainKeyConstant) }), "hmacByte allocates")
}
