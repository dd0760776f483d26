package session_test

import (
	"crypto/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/session"
)

// TestSendingChainFull: a sending chain is full after MaxSkip+1 messages;
// the last of them is still accepted by a receiver that missed all the
// others, and the next one would not be. An answer starts a new chain.
func TestSendingChainFull(t *testing.T) {
	_, _, as, bs := confirmed(t)
	var envs []session.Envelope
	for i := range session.MaxSkip + 1 {
		require.False(t, as.SendingChainFull(), "full after %d messages", i)
		envs = append(envs, encrypt(t, as, msg("m", i)))
	}
	require.True(t, as.SendingChainFull())
	// The message after a full chain would be refused by bob, who missed
	// the whole chain: that is what a full chain prevents.
	over := encrypt(t, roundTrip(t, as), "over")
	before := stateOf(t, bs)
	_, err := bs.Decrypt(over)
	require.ErrorIs(t, err, session.ErrTooManySkipped)
	require.Equal(t, before, stateOf(t, bs))
	decrypt(t, bs, envs[session.MaxSkip], msg("m", session.MaxSkip))

	decrypt(t, as, encrypt(t, bs, "answer"), "answer")
	require.False(t, as.SendingChainFull(), "an answer starts a new sending chain")
	require.False(t, as.Retire().SendingChainFull(), "a record without state")
}

// TestNewSessionAfterFullChain: alice's whole full chain is lost; the new
// session she starts instead (Initiate, Supersede) is accepted by bob as
// alice starting over, and answered.
func TestNewSessionAfterFullChain(t *testing.T) {
	alice, bob, as, bs := confirmed(t)
	decrypt(t, bs, encrypt(t, as, "seen"), "seen")
	for range session.MaxSkip + 1 {
		_, err := as.Encrypt([]byte("lost"))
		require.NoError(t, err)
	}
	require.True(t, as.SendingChainFull())

	next, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
	require.NoError(t, err)
	require.NoError(t, next.Supersede(as))
	require.False(t, next.SendingChainFull())

	r := receive(t, bob, bs, encrypt(t, next, "after the outage"))
	require.Equal(t, "after the outage", string(r.Plaintext))
	require.Equal(t, next.InitiationID(), r.Session.InitiationID())
	rec := roundTrip(t, r.Session)
	reply, err := rec.Encrypt([]byte("welcome back"))
	require.NoError(t, err)
	decrypt(t, next, wire(t, reply), "welcome back")
	require.False(t, next.Initiating())
}
