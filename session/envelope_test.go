package session_test

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	mrand "math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

// sampleEnvelopes returns encoded envelopes with and without initiation
// header and one-time prekey.
func sampleEnvelopes(t testing.TB) [][]byte {
	t.Helper()
	alice := newDevice(t, "alice", 1, 1)
	bob := newDevice(t, "bob", 2, 0)
	var out [][]byte
	add := func(e session.Envelope) {
		b, err := e.MarshalBinary()
		require.NoError(t, err)
		out = append(out, b)
	}
	as, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle()) // no one-time prekey
	require.NoError(t, err)
	first := encrypt(t, as, "hello")
	add(first)
	bs, _, err := session.Respond(bob.id, bob.addr, bob.pk, first)
	require.NoError(t, err)
	add(encrypt(t, bs, "reply"))
	bs2, err := session.Initiate(rand.Reader, bob.id, bob.addr, alice.bundle()) // with one
	require.NoError(t, err)
	add(encrypt(t, bs2, ""))
	return out
}

func TestEnvelopeRoundTrip(t *testing.T) {
	for _, raw := range sampleEnvelopes(t) {
		e, err := session.UnmarshalEnvelope(raw)
		require.NoError(t, err)
		again, err := e.MarshalBinary()
		require.NoError(t, err)
		require.Equal(t, raw, again)
		require.Equal(t, byte(session.EnvelopeVersion), raw[0])
	}
}

func TestEnvelopeLayout(t *testing.T) {
	e := session.Envelope{
		Sender:     store.DeviceAddress{UserID: "a", DeviceID: 1},
		Recipient:  store.DeviceAddress{UserID: "bc", DeviceID: 2},
		Header:     session.RatchetHeader{DH: [32]byte{0: 0xAA, 31: 0xBB}, Answers: [32]byte{0: 0xA1, 31: 0xB1}, PN: 3, N: 4},
		Nonce:      [session.NonceSize]byte{0: 0xDD, 23: 0xEE},
		Ciphertext: bytes.Repeat([]byte{0xCC}, 16),
	}
	raw, err := e.MarshalBinary()
	require.NoError(t, err)
	var want []byte
	want = append(want, 2, 0)                     // version, flags
	want = append(want, 0, 1, 'a')                // sender user id
	want = binary.BigEndian.AppendUint64(want, 1) // sender device
	want = append(want, 0, 2, 'b', 'c')
	want = binary.BigEndian.AppendUint64(want, 2)
	want = append(want, e.Header.DH[:]...)
	want = append(want, e.Header.Answers[:]...)
	want = append(want, 0, 0, 0, 3, 0, 0, 0, 4) // PN, N
	want = append(want, e.Nonce[:]...)
	want = append(want, 0, 0, 0, 16) // ciphertext length
	want = append(want, e.Ciphertext...)
	require.Equal(t, want, raw)

	e.Initiation = &session.InitiationHeader{ID: [16]byte{1}, SignedPrekeyID: 7, HasOneTimePrekey: true, OneTimePrekeyID: 9}
	raw, err = e.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, byte(3), raw[1], "flags: initiation and one-time prekey")
	require.Len(t, raw, len(want)+16+64+32+4+4)
}

func TestUnmarshalEnvelopeRejects(t *testing.T) {
	raw := sampleEnvelopes(t)[0] // with initiation header
	plain := sampleEnvelopes(t)[1]

	// Every proper prefix is truncated.
	for _, r := range [][]byte{raw, plain} {
		for n := range len(r) {
			_, err := session.UnmarshalEnvelope(r[:n])
			require.ErrorIs(t, err, session.ErrMalformedEnvelope, "prefix %d", n)
		}
	}

	set := func(b []byte, i int, v byte) []byte {
		c := bytes.Clone(b)
		c[i] = v
		return c
	}
	userLenAt := 2
	pe, err := session.UnmarshalEnvelope(plain)
	require.NoError(t, err)
	ctLenOff := len(plain) - len(pe.Ciphertext) - 4
	bigCT := bytes.Clone(plain)
	binary.BigEndian.PutUint32(bigCT[ctLenOff:], 1<<31)
	shortCT := binary.BigEndian.AppendUint32(bytes.Clone(plain[:ctLenOff]), 15)
	shortCT = append(shortCT, pe.Ciphertext[:15]...)
	senderLen := 2 + len(pe.Sender.UserID) + 8
	recipientLen := 2 + len(pe.Recipient.UserID) + 8
	negDevice := bytes.Clone(plain)
	negDevice[2+2+len(pe.Sender.UserID)] = 0x80 // high byte of the sender device id
	// Sender bytes written twice: sender == recipient.
	sameAddr := append([]byte{session.EnvelopeVersion, 0}, plain[2:2+senderLen]...)
	sameAddr = append(sameAddr, plain[2:2+senderLen]...)
	sameAddr = append(sameAddr, plain[2+senderLen+recipientLen:]...)
	same := pe.Clone()
	same.Recipient = same.Sender
	_, err = same.MarshalBinary()
	require.ErrorIs(t, err, session.ErrMalformedEnvelope)

	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "truncated"},
		{"oversized", make([]byte, session.MaxEnvelopeSize+1), "exceeds MaxEnvelopeSize"},
		{"oversized valid prefix", append(bytes.Clone(plain), make([]byte, session.MaxEnvelopeSize)...), "exceeds MaxEnvelopeSize"},
		{"trailing byte", append(bytes.Clone(plain), 0), "trailing data"},
		{"version 0", set(plain, 0, 0), "unknown version 0"},
		{"version 1", set(plain, 0, 1), "version 1 is refused"},
		{"version 3", set(plain, 0, 3), "unknown version 3"},
		{"unknown flag", set(plain, 1, 4), "unknown flags"},
		{"one-time flag without initiation", set(plain, 1, 2), "without initiation"},
		{"empty user id", set(set(plain, userLenAt, 0), userLenAt+1, 0), "empty user id"},
		{"user id too long", set(set(plain, userLenAt, 0xFF), userLenAt+1, 0xFF), "at most 256"},
		{"negative device id", negDevice, "negative device id"},
		{"ciphertext length beyond input", bigCT, "truncated"},
		{"ciphertext shorter than tag", shortCT, "shorter than the tag"},
		{"sender equals recipient", sameAddr, "sender and recipient"},
		{"garbage", bytes.Repeat([]byte{0xFF}, 200), "unknown version 255"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := session.UnmarshalEnvelope(tt.in)
			require.ErrorIs(t, err, session.ErrMalformedEnvelope)
			require.ErrorContains(t, err, tt.want)
		})
	}

	rng := mrand.New(mrand.NewPCG(1, 2))
	for range 2000 {
		b := make([]byte, rng.IntN(300))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if rng.IntN(2) == 0 && len(b) > 2 {
			b[0], b[1] = session.EnvelopeVersion, byte(rng.IntN(4))
		}
		_, err := session.UnmarshalEnvelope(b)
		require.ErrorIs(t, err, session.ErrMalformedEnvelope)
	}
}

func FuzzUnmarshalEnvelope(f *testing.F) {
	for _, raw := range sampleEnvelopes(f) {
		f.Add(raw)
		f.Add(raw[:len(raw)/2])
	}
	f.Add([]byte{})
	f.Add([]byte{session.EnvelopeVersion, 0, 0, 1, 'a'})
	f.Add([]byte{session.EnvelopeVersion, 3})
	f.Add(bytes.Repeat([]byte{0xFF}, 100))
	f.Fuzz(func(t *testing.T, in []byte) {
		e, err := session.UnmarshalEnvelope(in)
		if err != nil {
			require.ErrorIs(t, err, session.ErrMalformedEnvelope)
			return
		}
		// Decoding is strict: whatever decodes re-encodes to the same bytes.
		out, err := e.MarshalBinary()
		require.NoError(t, err)
		require.Equal(t, in, out)
	})
}
