package seal_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/seal"
)

// A key anyone can guess is refused with ErrKey wherever a key comes in:
// NewKey of KeySize zero bytes, and NewKeyring given the zero Key (one not
// made by NewKey or GenerateKey) as its current key or as an older one.
// Keyring.Add refuses it too. Accepting it would seal the database with
// a key an attacker need not steal.
func TestZeroKeyIsRefused(t *testing.T) {
	good := newKey(t)
	other := newKey(t)
	_, err := seal.NewKey(make([]byte, seal.KeySize))
	require.ErrorIs(t, err, seal.ErrKey)
	require.ErrorContains(t, err, "zero")

	for _, tt := range []struct {
		name    string
		current seal.Key
		older   []seal.Key
	}{
		{"zero current", seal.Key{}, nil},
		{"zero current, good older", seal.Key{}, []seal.Key{good}},
		{"zero older", good, []seal.Key{seal.Key{}}},
		{"zero among older", good, []seal.Key{other, seal.Key{}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kr, err := seal.NewKeyring(tt.current, tt.older...)
			require.ErrorIs(t, err, seal.ErrKey)
			require.Nil(t, kr)
		})
	}

	// Nor does a keyring take the zero Key as its new sealing key: it
	// keeps sealing with the key it had.
	kr := newKeyring(t, good)
	require.ErrorIs(t, kr.Add(seal.Key{}), seal.ErrKey)
	require.Equal(t, good.ID(), kr.Current())
	require.Equal(t, []seal.KeyID{good.ID()}, kr.KeyIDs())
	sealed, err := kr.Seal(seal.RecordSession, nil, []byte("x"))
	require.NoError(t, err)
	h, err := seal.Parse(sealed)
	require.NoError(t, err)
	require.Equal(t, good.ID(), h.KeyID)
	_, err = newKeyring(t, good).Open(seal.RecordSession, nil, sealed)
	require.NoError(t, err, "sealed with the good key")

	// A key with a single non-zero byte, anywhere, is a key.
	for _, i := range []int{0, seal.KeySize / 2, seal.KeySize - 1} {
		secret := make([]byte, seal.KeySize)
		secret[i] = 1
		k, err := seal.NewKey(secret)
		require.NoError(t, err, "byte %d set", i)
		_, err = seal.NewKeyring(k)
		require.NoError(t, err)
	}
}

// Bytes gives back exactly the secret NewKey was given, as a copy: what
// the caller does with it changes neither the key nor a later Bytes; a
// generated key's bytes rebuild the same key, which opens what it sealed.
func TestKeyBytes(t *testing.T) {
	secret := bytes.Repeat([]byte{7}, seal.KeySize)
	k, err := seal.NewKey(secret)
	require.NoError(t, err)
	got := k.Bytes()
	require.Equal(t, secret, got)
	got[0] ^= 0xff
	require.Equal(t, secret, k.Bytes(), "Bytes returns a copy")

	g := newKey(t)
	back, err := seal.NewKey(g.Bytes())
	require.NoError(t, err)
	require.Equal(t, g.ID(), back.ID())
	require.Equal(t, g.Bytes(), back.Bytes())
	sealed, err := newKeyring(t, g).Seal(seal.RecordSession, []byte("row"), []byte("x"))
	require.NoError(t, err)
	pt, err := newKeyring(t, back).Open(seal.RecordSession, []byte("row"), sealed)
	require.NoError(t, err)
	require.Equal(t, []byte("x"), pt)

	require.Equal(t, make([]byte, seal.KeySize), seal.Key{}.Bytes(), "the zero Key's bytes")
}

// An application generates its storage key once, keeps its bytes in the
// platform keystore, and rebuilds the key from them on every start.
func ExampleKey_Bytes() {
	key, err := seal.GenerateKey()
	if err != nil {
		panic(err)
	}
	stored := key.Bytes() // what the application puts in its keystore

	// On a later start: the bytes read back from the keystore.
	again, err := seal.NewKey(stored)
	if err != nil {
		panic(err)
	}
	keys, err := seal.NewKeyring(key)
	if err != nil {
		panic(err)
	}
	sealed, err := keys.Seal(seal.RecordPendingOutbound, []byte("row"), []byte("hello"))
	if err != nil {
		panic(err)
	}
	reopened, err := seal.NewKeyring(again)
	if err != nil {
		panic(err)
	}
	plaintext, err := reopened.Open(seal.RecordPendingOutbound, []byte("row"), sealed)
	fmt.Println(len(stored), again.ID() == key.ID(), string(plaintext), err)
	// Output: 32 true hello <nil>
}

// A nil *Keyring holds no key: Seal and Open report ErrKey instead of
// panicking, and the other constructors' nil inputs are refused too. The
// zero Keyring holds no key either: its Seal is refused rather than sealing
// with 32 zero bytes.
func TestNilInputs(t *testing.T) {
	var kr *seal.Keyring
	var zero seal.Keyring
	for _, tt := range []struct {
		name string
		call func() error
		want error
	}{
		{"NewKey nil", func() error { _, err := seal.NewKey(nil); return err }, seal.ErrKey},
		{"NewKeyring zero Key", func() error { _, err := seal.NewKeyring(seal.Key{}); return err }, seal.ErrKey},
		{"Parse nil", func() error { _, err := seal.Parse(nil); return err }, seal.ErrTruncated},
		{"nil Keyring Add", func() error { return kr.Add(newKey(t)) }, seal.ErrKey},
		{"nil Keyring Seal", func() error { _, err := kr.Seal(seal.RecordSession, nil, []byte("x")); return err }, seal.ErrKey},
		{"nil Keyring Forget", func() error { return kr.Forget(1) }, seal.ErrKey},
		{"zero Keyring Seal", func() error { _, err := zero.Seal(seal.RecordSession, nil, []byte("x")); return err }, seal.ErrKey},
		{"zero Keyring Open", func() error {
			sealed, err := newKeyring(t, newKey(t)).Seal(seal.RecordSession, nil, []byte("x"))
			require.NoError(t, err)
			_, err = zero.Open(seal.RecordSession, nil, sealed)
			return err
		}, seal.ErrWrongKey},
		{"nil Keyring Open", func() error {
			sealed, err := newKeyring(t, newKey(t)).Seal(seal.RecordSession, nil, []byte("x"))
			require.NoError(t, err)
			_, err = kr.Open(seal.RecordSession, nil, sealed)
			return err
		}, seal.ErrKey},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = tt.call() })
			require.ErrorIs(t, err, tt.want)
		})
	}
	require.Zero(t, kr.Current())
	require.Empty(t, kr.KeyIDs())
	require.Empty(t, zero.KeyIDs())

	// Add gives the zero Keyring its first key, which then seals.
	k := newKey(t)
	require.NotPanics(t, func() { require.NoError(t, zero.Add(k)) })
	require.Equal(t, k.ID(), zero.Current())
	sealed, err := zero.Seal(seal.RecordSession, nil, []byte("x"))
	require.NoError(t, err)
	got, err := newKeyring(t, k).Open(seal.RecordSession, nil, sealed)
	require.NoError(t, err)
	require.Equal(t, []byte("x"), got)
}

// A key whose id is held by another key is refused, wherever it comes in:
// records name their key by id only, so holding both would open the
// first key's records with the second (seal.ErrAuthentication for every
// one), and replacing the first would lose it. Adding the same key again
// is still a no-op.
func TestKeyIDCollisionIsRefused(t *testing.T) {
	a, b := storetest.CollidingKeys(t)
	other := newKey(t)

	_, err := seal.NewKeyring(a, b)
	require.ErrorIs(t, err, seal.ErrKey)

	for _, tt := range []struct {
		name  string
		held  []seal.Key // current first
		added seal.Key
		err   error
	}{
		{"colliding with the current key", []seal.Key{a}, b, seal.ErrKey},
		{"colliding with an older key", []seal.Key{other, a}, b, seal.ErrKey},
		{"the current key again", []seal.Key{a}, a, nil},
		{"an older key again", []seal.Key{other, a}, a, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kr := newKeyring(t, tt.held[0], tt.held[1:]...)
			sealed, err := newKeyring(t, a).Seal(seal.RecordSession, []byte("row"), []byte("plaintext"))
			require.NoError(t, err)
			current, ids := kr.Current(), kr.KeyIDs()

			err = kr.Add(tt.added)
			if tt.err != nil {
				require.ErrorIs(t, err, tt.err)
				require.ErrorContains(t, err, fmt.Sprint(a.ID()))
				require.Equal(t, current, kr.Current(), "the sealing key is unchanged")
			} else {
				require.NoError(t, err)
				require.Equal(t, tt.added.ID(), kr.Current())
			}
			require.Equal(t, ids, kr.KeyIDs())
			pt, err := kr.Open(seal.RecordSession, []byte("row"), sealed)
			require.NoError(t, err, "the held key still opens its records")
			require.Equal(t, []byte("plaintext"), pt)
		})
	}
}
