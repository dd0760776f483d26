package seal_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/chacha20poly1305"

	"github.com/securemsg/storage/seal"
)

func newKey(t testing.TB) seal.Key {
	t.Helper()
	k, err := seal.GenerateKey()
	require.NoError(t, err)
	return k
}

func newKeyring(t testing.TB, current seal.Key, older ...seal.Key) *seal.Keyring {
	t.Helper()
	kr, err := seal.NewKeyring(current, older...)
	require.NoError(t, err)
	return kr
}

// rowAD is the associated data of one pending row: recipient and logical
// id, id zero-padded to 16 bytes.
func rowAD(user string, device int64, id string) []byte {
	var logicalID [16]byte
	copy(logicalID[:], id)
	return seal.MessageAD(user, device, logicalID)
}

// sentinels are every error Open may wrap.
var sentinels = []error{
	seal.ErrTruncated, seal.ErrMalformed, seal.ErrUnknownVersion,
	seal.ErrRecordType, seal.ErrWrongKey, seal.ErrAuthentication,
}

// requireOneSentinel checks that err wraps exactly one of the sentinels,
// want.
func requireOneSentinel(t testing.TB, want, err error) {
	t.Helper()
	require.ErrorIs(t, err, want)
	for _, s := range sentinels {
		if s != want {
			require.NotErrorIs(t, err, s)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	kr := newKeyring(t, newKey(t))
	ad := rowAD("alice", 1, "id-1")
	for _, tc := range []struct {
		name string
		pt   []byte
	}{
		{"empty", []byte{}},
		{"nil", nil},
		{"short", []byte("hello")},
		{"binary", []byte{0, 1, 2, 0xff, 0}},
		{"large", bytes.Repeat([]byte("x"), 1<<16)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, rt := range []seal.RecordType{
				seal.RecordLocalIdentity, seal.RecordIdentityPin, seal.RecordSession, seal.RecordSessionInitiation,
				seal.RecordPendingOutbound, seal.RecordPendingInbound, seal.RecordKeyVerifier,
			} {
				sealed, err := kr.Seal(rt, ad, tc.pt)
				require.NoError(t, err)
				require.Len(t, sealed, seal.Overhead+len(tc.pt))
				require.Equal(t, []byte("KSMR"), sealed[:4])
				h, err := seal.Parse(sealed)
				require.NoError(t, err)
				require.Equal(t, seal.Header{Version: seal.Version, RecordType: rt, KeyID: kr.Current()}, h)
				if len(tc.pt) > 0 {
					require.False(t, bytes.Contains(sealed, tc.pt), "plaintext is not in the clear")
				}
				got, err := kr.Open(rt, ad, sealed)
				require.NoError(t, err)
				require.Equal(t, len(tc.pt), len(got))
				require.True(t, bytes.Equal(tc.pt, got))
			}
		})
	}
}

func TestSealUsesFreshNonces(t *testing.T) {
	kr := newKeyring(t, newKey(t))
	a, err := kr.Seal(seal.RecordSession, nil, []byte("same"))
	require.NoError(t, err)
	b, err := kr.Seal(seal.RecordSession, nil, []byte("same"))
	require.NoError(t, err)
	require.NotEqual(t, a, b)
	require.NotEqual(t, a[10:34], b[10:34], "nonces differ")
}

func TestADMismatch(t *testing.T) {
	kr := newKeyring(t, newKey(t))
	ad := rowAD("alice", 1, "id-1")
	sealed, err := kr.Seal(seal.RecordPendingOutbound, ad, []byte("secret"))
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		ad   []byte
	}{
		{"another logical id", rowAD("alice", 1, "id-2")},
		{"another device", rowAD("alice", 2, "id-1")},
		{"another user", rowAD("bob", 1, "id-1")},
		{"no associated data", nil},
		{"raw concatenation", []byte("alice\x00\x00\x00\x00\x00\x00\x00\x01id-1\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pt, err := kr.Open(seal.RecordPendingOutbound, tc.ad, sealed)
			requireOneSentinel(t, seal.ErrAuthentication, err)
			require.Nil(t, pt)
		})
	}
}

func TestRecordTypeMismatch(t *testing.T) {
	kr := newKeyring(t, newKey(t))
	ad := rowAD("alice", 1, "")
	sealed, err := kr.Seal(seal.RecordSession, ad, []byte("session"))
	require.NoError(t, err)
	for _, rt := range []seal.RecordType{seal.RecordIdentityPin, seal.RecordSessionInitiation, seal.RecordPendingOutbound, 0, 255} {
		t.Run(fmt.Sprint(rt), func(t *testing.T) {
			pt, err := kr.Open(rt, ad, sealed)
			requireOneSentinel(t, seal.ErrRecordType, err)
			require.Nil(t, pt)
		})
	}
}

func TestWrongKey(t *testing.T) {
	secret := bytes.Repeat([]byte{7}, seal.KeySize)
	k1, err := seal.NewKey(secret)
	require.NoError(t, err)
	k2 := newKey(t)
	sealed, err := newKeyring(t, k1).Seal(seal.RecordSession, nil, []byte("x"))
	require.NoError(t, err)
	other := newKeyring(t, k2)
	require.NotContains(t, other.KeyIDs(), k1.ID())
	pt, err := other.Open(seal.RecordSession, nil, sealed)
	requireOneSentinel(t, seal.ErrWrongKey, err)
	require.Nil(t, pt)

	// The same secret gives the same key id, so a keyring rebuilt from
	// the stored secret opens the record.
	same, err := seal.NewKey(bytes.Clone(secret))
	require.NoError(t, err)
	require.Equal(t, k1.ID(), same.ID())
	got, err := newKeyring(t, same).Open(seal.RecordSession, nil, sealed)
	require.NoError(t, err)
	require.Equal(t, []byte("x"), got)
}

func TestTruncation(t *testing.T) {
	kr := newKeyring(t, newKey(t))
	ad := rowAD("alice", 1, "id")
	sealed, err := kr.Seal(seal.RecordPendingOutbound, ad, []byte("a message long enough to truncate"))
	require.NoError(t, err)
	for n := 0; n < len(sealed); n++ {
		pt, err := kr.Open(seal.RecordPendingOutbound, ad, bytes.Clone(sealed[:n]))
		require.Nil(t, pt, "length %d", n)
		if n < seal.Overhead {
			// Shorter than a header, nonce and tag: known to be cut.
			requireOneSentinel(t, seal.ErrTruncated, err)
			_, perr := seal.Parse(sealed[:n])
			require.ErrorIs(t, perr, seal.ErrTruncated, "length %d", n)
		} else {
			// Long enough to hold a tag: a cut record cannot be told from
			// an altered one, the AEAD rejects it.
			requireOneSentinel(t, seal.ErrAuthentication, err)
		}
	}
}

func TestBitFlips(t *testing.T) {
	kr := newKeyring(t, newKey(t))
	ad := rowAD("alice", 1, "id")
	sealed, err := kr.Seal(seal.RecordPendingOutbound, ad, []byte("flip me"))
	require.NoError(t, err)
	for i := 0; i < len(sealed); i++ {
		var want error
		switch {
		case i < 4:
			want = seal.ErrMalformed
		case i == 4:
			want = seal.ErrUnknownVersion
		case i == 5:
			want = seal.ErrRecordType
		case i < 10:
			want = seal.ErrWrongKey
		default: // nonce, ciphertext, tag
			want = seal.ErrAuthentication
		}
		for bit := 0; bit < 8; bit++ {
			v := bytes.Clone(sealed)
			v[i] ^= 1 << bit
			pt, err := kr.Open(seal.RecordPendingOutbound, ad, v)
			require.Nil(t, pt, "byte %d bit %d", i, bit)
			require.Error(t, err)
			requireOneSentinel(t, want, err)
		}
	}
}

func TestUnknownVersion(t *testing.T) {
	kr := newKeyring(t, newKey(t))
	sealed, err := kr.Seal(seal.RecordSession, nil, []byte("x"))
	require.NoError(t, err)
	for _, v := range []byte{0, 2, 3, 0xff} {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			c := bytes.Clone(sealed)
			c[4] = v
			pt, err := kr.Open(seal.RecordSession, nil, c)
			requireOneSentinel(t, seal.ErrUnknownVersion, err)
			require.Nil(t, pt)
			h, err := seal.Parse(c)
			require.ErrorIs(t, err, seal.ErrUnknownVersion)
			require.Equal(t, v, h.Version)
			// A short record of an unknown version reports the version.
			pt, err = kr.Open(seal.RecordSession, nil, c[:12])
			requireOneSentinel(t, seal.ErrUnknownVersion, err)
			require.Nil(t, pt)
		})
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"nil", nil, seal.ErrTruncated},
		{"empty", []byte{}, seal.ErrTruncated},
		{"magic prefix", []byte("KS"), seal.ErrTruncated},
		{"other prefix", []byte("KX"), seal.ErrMalformed},
		{"magic only", []byte("KSMR"), seal.ErrTruncated},
		{"garbage", []byte("not a sealed record at all, really not"), seal.ErrMalformed},
		{"lowercase magic", append([]byte("ksmr\x01\x05"), make([]byte, 60)...), seal.ErrMalformed},
		{"header only", []byte("KSMR\x01\x05\x00\x00\x00\x01"), seal.ErrTruncated},
		{"header and nonce", append([]byte("KSMR\x01\x05\x00\x00\x00\x01"), make([]byte, 24)...), seal.ErrTruncated},
		{"minimal", append([]byte("KSMR\x01\x05\x00\x00\x00\x01"), make([]byte, 40)...), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := seal.Parse(tc.in)
			if tc.want == nil {
				require.NoError(t, err)
				require.Equal(t, seal.Header{Version: 1, RecordType: seal.RecordPendingOutbound, KeyID: 1}, h)
				return
			}
			require.ErrorIs(t, err, tc.want)
		})
	}
}

func TestRotation(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	kr := newKeyring(t, k1)
	require.Equal(t, k1.ID(), kr.Current())
	old, err := kr.Seal(seal.RecordSession, nil, []byte("old"))
	require.NoError(t, err)

	kr.Add(k2)
	require.Equal(t, k2.ID(), kr.Current())
	require.Contains(t, kr.KeyIDs(), k1.ID())
	require.Contains(t, kr.KeyIDs(), k2.ID())
	ids := []seal.KeyID{k1.ID(), k2.ID()}
	if ids[0] > ids[1] {
		ids[0], ids[1] = ids[1], ids[0]
	}
	require.Equal(t, ids, kr.KeyIDs())

	fresh, err := kr.Seal(seal.RecordSession, nil, []byte("new"))
	require.NoError(t, err)
	h, err := seal.Parse(fresh)
	require.NoError(t, err)
	require.Equal(t, k2.ID(), h.KeyID, "new records carry the new key id")
	h, err = seal.Parse(old)
	require.NoError(t, err)
	require.Equal(t, k1.ID(), h.KeyID)

	got, err := kr.Open(seal.RecordSession, nil, old)
	require.NoError(t, err, "old records still open during the rotation")
	require.Equal(t, []byte("old"), got)

	// The current key cannot be forgotten.
	err = kr.Forget(k2.ID())
	require.ErrorIs(t, err, seal.ErrKey)
	require.Contains(t, kr.KeyIDs(), k2.ID())

	require.NoError(t, kr.Forget(k1.ID()))
	require.NotContains(t, kr.KeyIDs(), k1.ID())
	require.Equal(t, []seal.KeyID{k2.ID()}, kr.KeyIDs())
	pt, err := kr.Open(seal.RecordSession, nil, old)
	requireOneSentinel(t, seal.ErrWrongKey, err)
	require.Nil(t, pt)
	got, err = kr.Open(seal.RecordSession, nil, fresh)
	require.NoError(t, err)
	require.Equal(t, []byte("new"), got)

	// Adding the current key again changes nothing; forgetting an unknown
	// key is harmless.
	kr.Add(k2)
	require.Equal(t, []seal.KeyID{k2.ID()}, kr.KeyIDs())
	require.NoError(t, kr.Forget(k1.ID()))

	// A keyring built with older keys opens their records.
	kr2 := newKeyring(t, k2, k1)
	require.Equal(t, k2.ID(), kr2.Current())
	got, err = kr2.Open(seal.RecordSession, nil, old)
	require.NoError(t, err)
	require.Equal(t, []byte("old"), got)
}

func TestKeys(t *testing.T) {
	for _, n := range []int{0, 1, seal.KeySize - 1, seal.KeySize + 1, 64} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			_, err := seal.NewKey(make([]byte, n))
			require.ErrorIs(t, err, seal.ErrKey)
		})
	}
	_, err := seal.NewKey(nil)
	require.ErrorIs(t, err, seal.ErrKey)

	// Ids come from the secret alone; different secrets give different ids.
	a, err := seal.NewKey(bytes.Repeat([]byte{1}, seal.KeySize))
	require.NoError(t, err)
	a2, err := seal.NewKey(bytes.Repeat([]byte{1}, seal.KeySize))
	require.NoError(t, err)
	b, err := seal.NewKey(bytes.Repeat([]byte{2}, seal.KeySize))
	require.NoError(t, err)
	require.Equal(t, a.ID(), a2.ID())
	require.NotEqual(t, a.ID(), b.ID())

	// The secret is copied: changing the caller's buffer changes nothing.
	secret := bytes.Repeat([]byte{3}, seal.KeySize)
	c, err := seal.NewKey(secret)
	require.NoError(t, err)
	sealed, err := newKeyring(t, c).Seal(seal.RecordSession, nil, []byte("x"))
	require.NoError(t, err)
	secret[0] ^= 0xff
	got, err := newKeyring(t, c).Open(seal.RecordSession, nil, sealed)
	require.NoError(t, err)
	require.Equal(t, []byte("x"), got)

	// Two keys with one id cannot share a keyring.
	_, err = seal.NewKeyring(a, a2)
	require.ErrorIs(t, err, seal.ErrKey)
	_, err = seal.NewKeyring(a, b, b)
	require.ErrorIs(t, err, seal.ErrKey)
}

func TestConcurrentUse(t *testing.T) {
	kr := newKeyring(t, newKey(t))
	done := make(chan error)
	const n = 8
	for i := 0; i < n; i++ {
		go func(i int) {
			for j := 0; j < 50; j++ {
				pt := []byte(fmt.Sprint(i, j))
				s, err := kr.Seal(seal.RecordSession, nil, pt)
				if err != nil {
					done <- err
					return
				}
				got, err := kr.Open(seal.RecordSession, nil, s)
				if err != nil {
					done <- err
					return
				}
				if !bytes.Equal(pt, got) {
					done <- errors.New("mismatch")
					return
				}
				_ = kr.KeyIDs()
			}
			done <- nil
		}(i)
	}
	rotator, err := seal.GenerateKey()
	require.NoError(t, err)
	kr.Add(rotator)
	for i := 0; i < n; i++ {
		require.NoError(t, <-done)
	}
}

// fuzzSecret, fuzzNonce and fuzzAD fix the fuzz target's one valid record,
// built by hand from the documented layout (a known-answer test of the
// format) so that it is the same in every run.
var (
	fuzzSecret = bytes.Repeat([]byte{0x42}, seal.KeySize)
	fuzzNonce  = bytes.Repeat([]byte{0x24}, chacha20poly1305.NonceSizeX)
	fuzzAD     = rowAD("alice", 1, "0123456789abcdef")
	fuzzText   = []byte("the only plaintext")
)

// knownRecord seals fuzzText with fuzzSecret and fuzzNonce following the
// layout in the package documentation.
func knownRecord(t testing.TB) (*seal.Keyring, []byte) {
	t.Helper()
	k, err := seal.NewKey(fuzzSecret)
	require.NoError(t, err)
	header := []byte("KSMR")
	header = append(header, seal.Version, byte(seal.RecordPendingOutbound))
	header = binary.BigEndian.AppendUint32(header, uint32(k.ID()))
	aead, err := chacha20poly1305.NewX(fuzzSecret)
	require.NoError(t, err)
	record := append(append(bytes.Clone(header), fuzzNonce...), aead.Seal(nil, fuzzNonce, fuzzText, append(bytes.Clone(header), fuzzAD...))...)
	return newKeyring(t, k), record
}

func TestKnownAnswer(t *testing.T) {
	kr, record := knownRecord(t)
	got, err := kr.Open(seal.RecordPendingOutbound, fuzzAD, record)
	require.NoError(t, err)
	require.Equal(t, fuzzText, got)
	// And the other way round: what Seal writes, the layout reads.
	sealed, err := kr.Seal(seal.RecordPendingOutbound, fuzzAD, fuzzText)
	require.NoError(t, err)
	aead, err := chacha20poly1305.NewX(fuzzSecret)
	require.NoError(t, err)
	pt, err := aead.Open(nil, sealed[10:34], sealed[34:], append(bytes.Clone(sealed[:10]), fuzzAD...))
	require.NoError(t, err)
	require.Equal(t, fuzzText, pt)
}

func FuzzOpen(f *testing.F) {
	kr, valid := knownRecord(f)
	f.Add(valid)
	f.Add(valid[:len(valid)-1])
	f.Add(valid[:seal.Overhead])
	f.Add(valid[:10])
	f.Add([]byte{})
	f.Add([]byte("KSMR"))
	f.Add([]byte("garbage, not a record"))
	f.Add(append([]byte("KSMR\x02"), valid[5:]...))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := bytes.Clone(data)
		_, _ = seal.Parse(data)
		pt, err := kr.Open(seal.RecordPendingOutbound, fuzzAD, data)
		require.Equal(t, in, data, "Open does not modify its input")
		if err != nil {
			require.Nil(t, pt, "no plaintext with an error")
			known := false
			for _, s := range sentinels {
				known = known || errors.Is(err, s)
			}
			require.True(t, known, "unexpected error %v", err)
			return
		}
		require.Equal(t, valid, data, "only the untouched valid record opens")
		require.Equal(t, fuzzText, pt)
	})
}

func ExampleKeyring_Seal() {
	key, err := seal.GenerateKey()
	if err != nil {
		panic(err)
	}
	keys, err := seal.NewKeyring(key)
	if err != nil {
		panic(err)
	}
	// Bind the value to its row: here a pending message to alice/1.
	logicalID := [16]byte{0: 1}
	row := seal.MessageAD("alice", 1, logicalID)
	sealed, err := keys.Seal(seal.RecordPendingOutbound, row, []byte("hello"))
	if err != nil {
		panic(err)
	}
	h, _ := seal.Parse(sealed)
	fmt.Println("version", h.Version, "type", h.RecordType, "current key", h.KeyID == keys.Current(), "size", len(sealed)-seal.Overhead)

	plaintext, err := keys.Open(seal.RecordPendingOutbound, row, sealed)
	fmt.Printf("%s %v\n", plaintext, err)

	// Copied into another row, it does not open.
	other := seal.MessageAD("bob", 1, logicalID)
	_, err = keys.Open(seal.RecordPendingOutbound, other, sealed)
	fmt.Println(errors.Is(err, seal.ErrAuthentication))
	// Output:
	// version 1 type 5 current key true size 5
	// hello <nil>
	// true
}
