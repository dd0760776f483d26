package session_test

import (
	"crypto/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

// TestErrorsSayTheirContextOnce: every error of Initiate, Respond,
// Receive and Encrypt says once, first, which call failed and with which
// device ("session: receive from alice/1: ..."), whichever check failed:
// never without it, never twice, and names the device nowhere else.
func TestErrorsSayTheirContextOnce(t *testing.T) {
	alice, bob, as, bs := confirmed(t)
	bobLocal := session.Local{Identity: bob.id, Address: bob.addr, Prekeys: bob.pk}
	seen := encrypt(t, as, "seen")
	r, err := session.Receive(bobLocal, bs, seen)
	require.NoError(t, err)
	bs = r.Session

	carol := newDevice(t, "carol", 1, 1)
	cs, err := session.Initiate(rand.Reader, alice.id, alice.addr, carol.bundle())
	require.NoError(t, err)
	forged := encrypt(t, cs, "forged")
	forged.Ciphertext[0] ^= 1
	carolLocal := session.Local{Identity: carol.id, Address: carol.addr, Prekeys: carol.pk}

	badBundle := carol.bundle()
	badBundle.Signature = append([]byte(nil), badBundle.Signature...)
	badBundle.Signature[0] ^= 1

	for _, tc := range []struct {
		name, context string
		call          func() error
		is            error
	}{
		{"Receive a replay", "session: receive from alice/1: ", func() error {
			_, err := session.Receive(bobLocal, bs, seen)
			return err
		}, session.ErrReplay},
		{"Receive without an initiation or a session", "session: receive from alice/1: ", func() error {
			_, err := session.Receive(bobLocal, nil, seen)
			return err
		}, session.ErrNoInitiation},
		{"Receive a forged initiation", "session: receive from alice/1: ", func() error {
			_, err := session.Receive(carolLocal, nil, forged)
			return err
		}, session.ErrDecrypt},
		{"Receive without an identity", "session: receive from alice/1: ", func() error {
			_, err := session.Receive(session.Local{Address: bob.addr}, bs, seen)
			return err
		}, store.ErrInvalidArgument},
		{"Respond to a forged initiation", "session: respond to alice/1: ", func() error {
			_, _, err := session.Respond(carol.id, carol.addr, carol.pk, forged)
			return err
		}, session.ErrDecrypt},
		{"Respond to no initiation", "session: respond to alice/1: ", func() error {
			_, _, err := session.Respond(bob.id, bob.addr, bob.pk, seen)
			return err
		}, session.ErrNoInitiation},
		{"Initiate with a bundle that does not verify", "session: initiate with carol/1: ", func() error {
			_, err := session.Initiate(rand.Reader, alice.id, alice.addr, badBundle)
			return err
		}, session.ErrBadSignature},
		{"Initiate without an identity", "session: initiate with carol/1: ", func() error {
			_, err := session.Initiate(rand.Reader, nil, alice.addr, carol.bundle())
			return err
		}, store.ErrInvalidArgument},
		{"Encrypt too much", "session: encrypt for bob/1: ", func() error {
			_, err := as.Encrypt(make([]byte, session.MaxPlaintextSize+1))
			return err
		}, session.ErrMessageTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.ErrorIs(t, err, tc.is)
			require.True(t, strings.HasPrefix(err.Error(), tc.context), "%q does not start with %q", err, tc.context)
			require.Equal(t, 1, strings.Count(err.Error(), "session: "), "%q says its context more than once", err)
			device := strings.TrimSuffix(tc.context[strings.LastIndex(tc.context[:len(tc.context)-2], " ")+1:], ": ")
			require.Equal(t, 1, strings.Count(err.Error(), device), "%q names %s more than once", err, device)
		})
	}
}
