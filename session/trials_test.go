package session_test

import (
	"crypto/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/session"
)

// restarts is bob's record after alice started a session with him once
// per entry of answered (oldest first): where bob answered, alice
// decrypted his answer and wrote back on a new ratchet key, and that
// late envelope (late[i]) has not reached bob yet. The last session is
// the current state.
func restarts(t *testing.T, answered []bool) (bob *device, rec *session.Session, late []session.Envelope) {
	t.Helper()
	alice := newDevice(t, "alice", 1, 0)
	bob = newDevice(t, "bob", 1, 0)
	for i, answer := range answered {
		as, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
		require.NoError(t, err)
		rec = receive(t, bob, rec, encrypt(t, as, "start")).Session
		if !answer {
			late = append(late, session.Envelope{})
			continue
		}
		reply, err := rec.Encrypt([]byte("answer"))
		require.NoError(t, err)
		decrypt(t, as, wire(t, reply), "answer")
		late = append(late, encrypt(t, as, msg("late", i)))
	}
	return bob, roundTrip(t, rec), late
}

// allAnswered is a record at MaxArchivedStates: every one of its states
// was answered.
func allAnswered() []bool {
	answered := make([]bool, session.MaxArchivedStates+1)
	for i := range answered {
		answered[i] = true
	}
	return answered
}

// TestNewRatchetKeyGoesToTheStateItAnswers: an envelope on a ratchet key
// no state has seen (a new receiving chain) is tried by the state whose
// ratchet key it answers (RatchetHeader.Answers), however old: a late
// message of any archived state is delivered by that state, and the
// current state stays current.
func TestNewRatchetKeyGoesToTheStateItAnswers(t *testing.T) {
	yes, no := true, false
	last := session.MaxArchivedStates
	tests := []struct {
		name     string
		answered []bool // oldest first; the last is the current state
		late     int    // which session's late envelope arrives
	}{
		{"current state", allAnswered(), last},
		{"newest archived", allAnswered(), last - 1},
		{"third newest archived", allAnswered(), last - 3},
		{"fourth newest archived", allAnswered(), last - 4},
		{"oldest archived", allAnswered(), 0},
		{"newer states that never sent", []bool{yes, no, no, no, no, yes}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bob, rec, late := restarts(t, tt.answered)
			r := receive(t, bob, rec, late[tt.late])
			require.Equal(t, msg("late", tt.late), string(r.Plaintext))
			require.Equal(t, rec.ArchivedStates(), r.Session.ArchivedStates(), "the late message archives nothing")
			require.Equal(t, rec.InitiationID(), r.Session.InitiationID(), "the current state stays current")
		})
	}
	t.Run("every state in turn", func(t *testing.T) {
		bob, rec, late := restarts(t, allAnswered())
		id := rec.InitiationID()
		for i, env := range late {
			r := receive(t, bob, rec, env)
			require.Equal(t, msg("late", i), string(r.Plaintext))
			rec = r.Session
		}
		require.Equal(t, session.MaxArchivedStates, rec.ArchivedStates())
		require.Equal(t, id, rec.InitiationID())
	})
}

// TestForgedAnswerChangesNothing: an envelope on a new ratchet key that
// answers a state's ratchet key but does not authenticate, or that
// answers none, fails with ErrDecrypt and changes nothing; the genuine
// late messages are delivered afterwards.
func TestForgedAnswerChangesNothing(t *testing.T) {
	bob, rec, late := restarts(t, allAnswered())
	// bob's current ratchet key, as the relay sees it in his envelopes.
	probe, err := roundTrip(t, rec).Encrypt([]byte("probe"))
	require.NoError(t, err)
	current := probe.Header.DH
	var fresh [session.KeySize]byte
	_, err = rand.Read(fresh[:])
	require.NoError(t, err)

	badTag := late[0].Clone()
	badTag.Ciphertext[0] ^= 1
	answersCurrent := late[0].Clone()
	answersCurrent.Header.Answers = current // tag no longer matches
	forgedOnCurrent := late[0].Clone()
	forgedOnCurrent.Header.DH, forgedOnCurrent.Header.Answers = fresh, current
	answersNone := late[0].Clone()
	answersNone.Header.Answers = fresh
	tests := []struct {
		name string
		env  session.Envelope
	}{
		{"answers an archived state, bad tag", badTag},
		{"moved to the current state", answersCurrent},
		{"new key answering the current state", forgedOnCurrent},
		{"answers no state", answersNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, receiveErr(t, bob, rec, tt.env), session.ErrDecrypt)
		})
	}
	for i, env := range late {
		r := receive(t, bob, rec, env)
		require.Equal(t, msg("late", i), string(r.Plaintext))
		rec = r.Session
	}
}

// TestKnownRatchetKeyGoesToItsState: an envelope on a ratchet key a state
// has seen is tried by that state alone: a replay of a late message that
// an archived state decrypted fails there with ErrReplay (the current
// state does not take it for a new chain of its own), and a forgery on
// that chain with ErrDecrypt; neither changes anything.
func TestKnownRatchetKeyGoesToItsState(t *testing.T) {
	bob, rec, late := restarts(t, []bool{true, true})
	rec = receive(t, bob, rec, late[0]).Session
	require.ErrorIs(t, receiveErr(t, bob, rec, late[0]), session.ErrReplay)
	forged := late[0].Clone()
	forged.Header.N++
	require.ErrorIs(t, receiveErr(t, bob, rec, forged), session.ErrDecrypt)
}

// TestAnswersNamesTheKeyEachChainAnswers: every envelope's
// RatchetHeader.Answers is the receiver's ratchet key of the key
// agreement that started the sender's chain: the responder's signed
// prekey for the initiator's first chain (every envelope carrying the
// initiation header), then the ratchet key last received from the peer.
func TestAnswersNamesTheKeyEachChainAnswers(t *testing.T) {
	alice := newDevice(t, "alice", 1, 1)
	bob := newDevice(t, "bob", 1, 1)
	b := bob.bundle()
	as, err := session.Initiate(rand.Reader, alice.id, alice.addr, b)
	require.NoError(t, err)
	first := []session.Envelope{encrypt(t, as, "one"), encrypt(t, as, "two")}
	for _, env := range first {
		require.NotNil(t, env.Initiation)
		require.Equal(t, b.SignedPrekey, env.Header.Answers)
	}
	// The second initiation envelope arrives first: it starts the session
	// as well as the first would.
	r := receive(t, bob, nil, first[1])
	require.Equal(t, "two", string(r.Plaintext))
	bs := r.Session
	decrypt(t, bs, first[0], "one")
	reply := encrypt(t, bs, "three")
	require.Equal(t, first[0].Header.DH, reply.Header.Answers)
	decrypt(t, as, reply, "three")
	next := encrypt(t, as, "four")
	require.Nil(t, next.Initiation)
	require.Equal(t, reply.Header.DH, next.Header.Answers)
	require.NotEqual(t, first[0].Header.DH, next.Header.DH, "a new chain")
	decrypt(t, bs, next, "four")
}
