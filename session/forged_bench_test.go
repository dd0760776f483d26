package session_test

// BenchmarkForgedEnvelope measures what one forged envelope costs the
// receiver before it fails: every envelope from a peer is handed to
// Receive under the client's send mutex before anything authenticates
// it, so this is what a relay (or anyone who can reach the mailbox) can
// make each envelope it makes up cost.
//
//	go test -run '^$' -bench ForgedEnvelope -benchtime 20x -count 3 ./session/

import (
	"crypto/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/session"
)

// worstRecord is bob's record with alice at every bound that makes a
// trial decryption expensive: the current state and MaxArchivedStates
// archived ones, each with 8 previous ratchet keys, a receiving chain at
// message 2·MaxSkip+1 and its ratchet key sent to alice (so that it
// could take a new ratchet key), MaxSkippedKeys skipped keys in the
// current state and MaxArchivedSkippedKeys in the archived ones.
type worstRecord struct {
	bob  *device
	rec  *session.Session
	last session.Envelope // alice's last envelope of the current state
	old  session.Envelope // alice's last envelope of the oldest archived state
	// bobKey is the current state's ratchet key, which bob sent: a new
	// ratchet key of alice's answering it is tried by that state.
	bobKey [session.KeySize]byte
}

func buildWorstRecord(tb testing.TB) worstRecord {
	tb.Helper()
	alice := newDevice(tb, "alice", 1, 0)
	bob := newDevice(tb, "bob", 1, 0)
	w := worstRecord{bob: bob}
	for i := range session.MaxArchivedStates + 1 {
		as, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
		require.NoError(tb, err)
		w.rec = receive(tb, bob, w.rec, encrypt(tb, as, "start")).Session
		for range 9 { // a DH ratchet step each way: 8 previous keys kept
			pong, err := w.rec.Encrypt([]byte("pong"))
			require.NoError(tb, err)
			_, err = as.Decrypt(wire(tb, pong))
			require.NoError(tb, err)
			w.rec = receive(tb, bob, w.rec, encrypt(tb, as, "ping")).Session
		}
		var last session.Envelope
		for range 2 { // MaxSkip lost, one arrives, twice
			for range session.MaxSkip {
				encrypt(tb, as, "lost")
			}
			last = encrypt(tb, as, "arrives")
			w.rec = receive(tb, bob, w.rec, last).Session
		}
		// bob answers: his ratchet key is sent, so alice could start a
		// new receiving chain with it.
		answer, err := w.rec.Encrypt([]byte("answer"))
		require.NoError(tb, err)
		if i == 0 {
			w.old = last
		}
		w.last, w.bobKey = last, answer.Header.DH
	}
	w.rec = roundTrip(tb, w.rec)
	current, archived := w.rec.SkippedKeys()
	require.Equal(tb, session.MaxSkippedKeys, current)
	require.Equal(tb, session.MaxArchivedSkippedKeys, archived)
	require.Equal(tb, session.MaxArchivedStates, w.rec.ArchivedStates())
	return w
}

func BenchmarkForgedEnvelope(b *testing.B) {
	w := buildWorstRecord(b)
	local := session.Local{Identity: w.bob.id, Address: w.bob.addr, Prekeys: w.bob.pk}
	// forge returns an envelope of alice's with the header h and a
	// ciphertext no key authenticates.
	forge := func(h session.RatchetHeader) session.Envelope {
		env := w.last.Clone()
		env.Header = h
		_, err := rand.Read(env.Ciphertext)
		require.NoError(b, err)
		return env
	}
	var fresh [session.KeySize]byte
	_, err := rand.Read(fresh[:])
	require.NoError(b, err)
	// The receiving chains are at message 2·MaxSkip+1: a previous chain
	// length MaxSkip beyond it makes every state skip as far as allowed.
	farPN := uint32(3*session.MaxSkip + 1)
	initLocal, initiation := forgeInitiation(b, w)
	cases := []struct {
		name  string
		local session.Local
		env   session.Envelope
	}{
		// A ratchet key no state has seen, answering the current state's
		// (which anyone reading bob's envelopes knows), as far ahead as
		// allowed in both chains: the state it answers tries it.
		{"new-ratchet-key", local, forge(session.RatchetHeader{DH: fresh, Answers: w.bobKey, PN: farPN, N: session.MaxSkip})},
		// The same, answering a ratchet key no state holds: no state
		// tries it.
		{"new-ratchet-key-answering-none", local, forge(session.RatchetHeader{DH: fresh, Answers: fresh, PN: farPN, N: session.MaxSkip})},
		// The current state's ratchet key, MaxSkip ahead.
		{"current-chain", local, forge(session.RatchetHeader{DH: w.last.Header.DH, N: w.last.Header.N + session.MaxSkip})},
		// The oldest archived state's ratchet key, MaxSkip ahead.
		{"oldest-archived-chain", local, forge(session.RatchetHeader{DH: w.old.Header.DH, N: w.old.Header.N + session.MaxSkip})},
		// A new initiation from alice's address (see forgeInitiation).
		{"initiation", initLocal, initiation},
	}
	for _, c := range cases {
		// Each fails at the tag, after all the work its header allows.
		_, err := session.Receive(c.local, w.rec, c.env)
		require.ErrorIs(b, err, session.ErrDecrypt, c.name)
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := session.Receive(c.local, w.rec, c.env); err == nil {
					b.Fatal("a forged envelope was accepted")
				}
			}
		})
	}
}

// forgeInitiation returns bob's Local with as many one-time prekeys as he
// may hold (Receive copies them) and a made-up initiation from alice's
// address: it names bob's signed prekey and one of his one-time prekeys
// (both in any bundle a directory hands out) and is MaxSkip ahead in its
// first chain, so that it costs every key agreement of X3DH, that of the
// first ratchet step and the chain keys up to its message before its tag
// fails. An initiation is answered before anything authenticates it.
func forgeInitiation(tb testing.TB, w worstRecord) (session.Local, session.Envelope) {
	tb.Helper()
	pk, err := session.NewPrekeys(rand.Reader, w.bob.id, session.MaxOneTimePrekeys)
	require.NoError(tb, err)
	bundle := pk.Bundle(w.bob.addr)
	bundle.OneTimePrekeys = bundle.OneTimePrekeys[len(bundle.OneTimePrekeys)-1:]
	stranger := newDevice(tb, w.last.Sender.UserID, w.last.Sender.DeviceID, 0)
	is, err := session.Initiate(rand.Reader, stranger.id, stranger.addr, bundle)
	require.NoError(tb, err)
	env := encrypt(tb, is, "forged")
	require.NotNil(tb, env.Initiation)
	require.True(tb, env.Initiation.HasOneTimePrekey)
	env.Header.N = session.MaxSkip
	_, err = rand.Read(env.Ciphertext)
	require.NoError(tb, err)
	return session.Local{Identity: w.bob.id, Address: w.bob.addr, Prekeys: pk}, env
}
