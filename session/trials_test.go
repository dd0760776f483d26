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

// TestNewRatchetKeyTrials: an envelope on a ratchet key no state has seen
// (a new receiving chain) is tried by the current state and by the newest
// three archived states that sent with their ratchet key, whose answer it
// can be; an archived state that never sent cannot be answered and is
// not counted. Beyond them it fails with ErrDecrypt and changes nothing.
func TestNewRatchetKeyTrials(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name     string
		answered []bool // oldest first; the last is the current state
		late     int    // which session's late envelope arrives
		ok       bool
	}{
		{"current state", []bool{yes, yes, yes, yes, yes, yes}, 5, true},
		{"newest archived", []bool{yes, yes, yes, yes, yes, yes}, 4, true},
		{"third newest archived", []bool{yes, yes, yes, yes, yes, yes}, 2, true},
		{"fourth newest archived", []bool{yes, yes, yes, yes, yes, yes}, 1, false},
		{"oldest archived", []bool{yes, yes, yes, yes, yes, yes}, 0, false},
		{"newer states that never sent are not counted", []bool{yes, no, no, no, no, yes}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bob, rec, late := restarts(t, tt.answered)
			env := late[tt.late]
			if !tt.ok {
				require.ErrorIs(t, receiveErr(t, bob, rec, env), session.ErrDecrypt)
				return
			}
			r := receive(t, bob, rec, env)
			require.Equal(t, msg("late", tt.late), string(r.Plaintext))
			require.Equal(t, rec.ArchivedStates(), r.Session.ArchivedStates(), "the late message archives nothing")
			require.Equal(t, rec.InitiationID(), r.Session.InitiationID(), "the current state stays current")
		})
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
