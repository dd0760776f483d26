package session_test

import (
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

// device is one test device with its private identity and prekeys.
type device struct {
	addr store.DeviceAddress
	id   *session.Identity
	pk   *session.Prekeys
}

func newDevice(t testing.TB, user string, dev int64, nOneTime int) *device {
	t.Helper()
	id, err := session.GenerateIdentity(rand.Reader)
	require.NoError(t, err)
	pk, err := session.NewPrekeys(rand.Reader, id, nOneTime)
	require.NoError(t, err)
	return &device{addr: store.DeviceAddress{UserID: user, DeviceID: dev}, id: id, pk: pk}
}

// bundle returns the device's bundle as a directory would hand it out: with
// at most one one-time prekey.
func (d *device) bundle() session.Bundle {
	b := d.pk.Bundle(d.addr)
	if len(b.OneTimePrekeys) > 1 {
		b.OneTimePrekeys = b.OneTimePrekeys[:1]
	}
	return b
}

// seeded returns a deterministic random source.
func seeded(seed uint64) *mrand.ChaCha8 {
	var s [32]byte
	s[0] = byte(seed)
	s[1] = byte(seed >> 8)
	return mrand.NewChaCha8(s)
}

// wire simulates the network: the envelope is encoded and decoded again.
func wire(t testing.TB, env session.Envelope) session.Envelope {
	t.Helper()
	b, err := env.MarshalBinary()
	require.NoError(t, err)
	out, err := session.UnmarshalEnvelope(b)
	require.NoError(t, err)
	return out
}

func stateOf(t testing.TB, s *session.Session) []byte {
	t.Helper()
	b, err := s.MarshalBinary()
	require.NoError(t, err)
	return b
}

func encrypt(t testing.TB, s *session.Session, msg string) session.Envelope {
	t.Helper()
	env, err := s.Encrypt([]byte(msg))
	require.NoError(t, err)
	return wire(t, env)
}

func decrypt(t testing.TB, s *session.Session, env session.Envelope, want string) {
	t.Helper()
	pt, err := s.Decrypt(env)
	require.NoError(t, err)
	require.Equal(t, want, string(pt))
}

// establish makes alice initiate with bob and bob respond to alice's first
// message, returning both sessions (alice still initiating).
func establish(t testing.TB, alice, bob *device) (as, bs *session.Session) {
	t.Helper()
	as, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
	require.NoError(t, err)
	env := encrypt(t, as, "hello bob")
	bs, pt, err := session.Respond(bob.id, bob.addr, bob.pk, env)
	require.NoError(t, err)
	require.Equal(t, "hello bob", string(pt))
	return as, bs
}

// confirmed establishes a session and lets bob reply once, so that alice no
// longer sends initiation headers.
func confirmed(t testing.TB) (alice, bob *device, as, bs *session.Session) {
	t.Helper()
	alice = newDevice(t, "alice", 1, 3)
	bob = newDevice(t, "bob", 1, 3)
	as, bs = establish(t, alice, bob)
	decrypt(t, as, encrypt(t, bs, "hi alice"), "hi alice")
	require.False(t, as.Initiating())
	return alice, bob, as, bs
}

func msg(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }

func mustUnmarshal(t testing.TB, raw []byte) session.Envelope {
	t.Helper()
	e, err := session.UnmarshalEnvelope(raw)
	require.NoError(t, err)
	return e
}

// crossInitiate has a and b initiate to each other at once (a collision)
// and returns a's and b's unanswered sessions.
func crossInitiate(t testing.TB, a, b *device) (*session.Session, *session.Session) {
	t.Helper()
	as, err := session.Initiate(rand.Reader, a.id, a.addr, b.bundle())
	require.NoError(t, err)
	bs, err := session.Initiate(rand.Reader, b.id, b.addr, a.bundle())
	require.NoError(t, err)
	return as, bs
}
