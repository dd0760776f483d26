package session

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/store"
)

// TestVersion1PrekeysUpgrade: a prekeys record stored in version 1 (no
// retired signed prekeys, signature over the signed prekey only) still
// decodes; its bundle does not verify under the current format until the
// owner upgrades it, and then does, with the same signed prekey.
func TestVersion1PrekeysUpgrade(t *testing.T) {
	id, err := GenerateIdentity(rand.Reader)
	require.NoError(t, err)
	pk, err := NewPrekeys(rand.Reader, id, 3)
	require.NoError(t, err)
	v1sig := ed25519.Sign(id.signing, signedPrekeyMessageV1(pk.signedID, pk.signed.pub))

	w := writer{}
	w.u8(prekeysVersion1)
	w.identity(pk.identity)
	w.u32(pk.signedID)
	w.key(pk.signed.priv)
	w.raw(v1sig)
	w.u32(pk.nextID)
	w.u16(uint16(len(pk.oneTime)))
	for _, o := range pk.oneTime {
		w.u32(o.id)
		w.key(o.kp.priv)
	}
	old, err := UnmarshalPrekeys(w.b)
	require.NoError(t, err)
	require.Equal(t, pk.signedID, old.SignedPrekeyID())
	require.Equal(t, 3, old.OneTimeCount())
	addr := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	require.ErrorIs(t, old.Bundle(addr).Verify(), ErrBadSignature, "a v1 signature does not verify as v2")

	other, err := GenerateIdentity(rand.Reader)
	require.NoError(t, err)
	require.ErrorIs(t, old.Upgrade(other), store.ErrInvalidArgument)
	require.NoError(t, old.Upgrade(id))
	require.NoError(t, old.Bundle(addr).Verify())
	require.Equal(t, pk.Bundle(addr), old.Bundle(addr), "same keys, the current signature")

	// A tampered version 1 signature is refused.
	w.b[1+64+4+32] ^= 1
	_, err = UnmarshalPrekeys(w.b)
	require.ErrorIs(t, err, ErrMalformedState)
}
