package session_test

import (
	"crypto/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

func TestCollisionWinner(t *testing.T) {
	a := store.DeviceAddress{UserID: "alice", DeviceID: 2}
	b := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	a1 := store.DeviceAddress{UserID: "alice", DeviceID: 1}
	require.Equal(t, a, session.CollisionWinner(a, b))
	require.Equal(t, a, session.CollisionWinner(b, a))
	require.Equal(t, a1, session.CollisionWinner(a, a1))
	require.Equal(t, a1, session.CollisionWinner(a1, a))
}

// TestSimultaneousInitiation: both devices initiate and send before either
// received the other's first envelope. Whatever the delivery order, Receive
// makes both converge on the initiation of the smaller address: the loser
// answers the winner's initiation (Receipt.Lost lists what it sent on its
// own, which it re-sends), the winner rejects every envelope of the losing
// initiation, before or after the re-sent messages, consuming no prekey and
// changing nothing once its base key is remembered; both directions work.
func TestSimultaneousInitiation(t *testing.T) {
	tests := []struct {
		name       string
		x, y       store.DeviceAddress
		staleLater bool // the winner gets the loser's re-sent messages before the losing initiation's envelopes
	}{
		{"x smaller", store.DeviceAddress{UserID: "alice", DeviceID: 1}, store.DeviceAddress{UserID: "bob", DeviceID: 1}, false},
		{"y smaller", store.DeviceAddress{UserID: "zoe", DeviceID: 1}, store.DeviceAddress{UserID: "bob", DeviceID: 9}, false},
		{"same user, other device", store.DeviceAddress{UserID: "carol", DeviceID: 5}, store.DeviceAddress{UserID: "carol", DeviceID: 3}, false},
		{"stale initiation after convergence", store.DeviceAddress{UserID: "alice", DeviceID: 1}, store.DeviceAddress{UserID: "bob", DeviceID: 1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newDevice(t, tt.x.UserID, tt.x.DeviceID, 2)
			y := newDevice(t, tt.y.UserID, tt.y.DeviceID, 2)
			xs, err := session.Initiate(rand.Reader, x.id, x.addr, y.bundle())
			require.NoError(t, err)
			ys, err := session.Initiate(rand.Reader, y.id, y.addr, x.bundle())
			require.NoError(t, err)
			require.NotEqual(t, xs.InitiationID(), ys.InitiationID())

			fromX := []session.Envelope{encrypt(t, xs, "x0"), encrypt(t, xs, "x1")}
			fromY := []session.Envelope{encrypt(t, ys, "y0"), encrypt(t, ys, "y1")}

			// Name the sides by the rule.
			winD, loseD := x, y
			winS, loseS := xs, ys
			fromWin, fromLose := fromX, fromY
			winText, loseText := []string{"x0", "x1"}, []string{"y0", "y1"}
			if session.CollisionWinner(x.addr, y.addr) == y.addr {
				winD, loseD, winS, loseS = y, x, ys, xs
				fromWin, fromLose = fromY, fromX
				winText, loseText = loseText, winText
			}
			winInit := winS.InitiationID()
			loseInit := loseS.InitiationID()

			// Decrypt alone refuses a foreign initiation.
			_, err = winS.Decrypt(fromLose[0])
			require.ErrorIs(t, err, session.ErrWrongSession)

			// The loser receives the winner's initiation.
			loseBefore := stateOf(t, loseS)
			r := receive(t, loseD, loseS, fromWin[0])
			require.Nil(t, r.Rejected)
			require.Equal(t, winText[0], string(r.Plaintext))
			require.NotNil(t, r.Lost)
			require.Equal(t, loseInit, r.Lost.InitiationID)
			require.Equal(t, winD.addr, r.Lost.Remote)
			require.Equal(t, []uint32{0, 1}, r.Lost.MessageNumbers)
			require.Equal(t, loseBefore, stateOf(t, loseS), "the losing session is not modified")
			lost := r.Lost
			loseS = roundTrip(t, r.Session)
			require.Equal(t, winInit, loseS.InitiationID())
			require.Equal(t, winD.addr, loseS.Initiator())
			require.False(t, loseS.Initiating())
			r = receive(t, loseD, loseS, fromWin[1])
			require.Equal(t, winText[1], string(r.Plaintext))
			require.Nil(t, r.Lost)
			loseS = r.Session

			// The loser re-sends what the lost initiation carried.
			var resent []session.Envelope
			for _, n := range lost.MessageNumbers {
				env := encrypt(t, loseS, loseText[n])
				require.Nil(t, env.Initiation)
				resent = append(resent, env)
			}

			// The winner rejects the losing initiation, on every envelope of
			// it: the first time remembering its base key, then changing
			// nothing; no prekey is consumed.
			checkRejected := func(env session.Envelope) {
				t.Helper()
				pkBefore, err := winD.pk.MarshalBinary()
				require.NoError(t, err)
				before := stateOf(t, winS)
				initiating := winS.Initiating()
				r, err := session.Receive(session.Local{Identity: winD.id, Address: winD.addr, Prekeys: winD.pk}, winS, env)
				require.NoError(t, err)
				require.NotNil(t, r.Rejected)
				require.Equal(t, loseInit, *r.Rejected)
				require.Nil(t, r.Lost)
				require.Nil(t, r.Plaintext)
				require.Nil(t, r.Prekeys, "no prekey consumed")
				require.Equal(t, before, stateOf(t, winS), "Receive changes nothing it is given")
				if r.Session != nil {
					winS = roundTrip(t, r.Session)
					require.Equal(t, winInit, winS.InitiationID())
					require.Equal(t, initiating, winS.Initiating())
				}
				pkAfter, err := winD.pk.MarshalBinary()
				require.NoError(t, err)
				require.Equal(t, pkBefore, pkAfter)
			}
			if !tt.staleLater {
				checkRejected(fromLose[0])
			}
			require.True(t, winS.Initiating())
			for i, env := range resent {
				r := receive(t, winD, winS, env)
				require.Equal(t, loseText[i], string(r.Plaintext))
				winS = r.Session
			}
			require.False(t, winS.Initiating())
			if tt.staleLater {
				staleAfterConvergence(t, winD, winS, loseD, loseS, fromLose, loseText)
				return
			}
			checkRejected(fromLose[1])
			// Every copy again: remembered, nothing to store.
			for _, env := range fromLose {
				r, err := session.Receive(session.Local{Identity: winD.id, Address: winD.addr, Prekeys: winD.pk}, winS, env)
				require.NoError(t, err)
				require.NotNil(t, r.Rejected)
				require.Nil(t, r.Session)
			}

			// Exactly one session on each side, of the same initiation; both
			// directions work.
			require.Equal(t, winS.InitiationID(), loseS.InitiationID())
			for i := range 3 {
				decrypt(t, loseS, encrypt(t, winS, msg("w", i)), msg("w", i))
				decrypt(t, winS, encrypt(t, loseS, msg("l", i)), msg("l", i))
			}
			decrypt(t, winS, encrypt(t, loseS, "l-extra"), "l-extra")
		})
	}
}

// staleAfterConvergence: the losing initiation reaches the winner only
// after the winner was answered on its own. That is no collision any more
// (the winner's initiation is answered): Receive takes it for the peer
// starting over, answers it and archives the converged state, and its
// other copies are routed to the new state. Both directions still work
// (each side decrypts the other's sending state from its archive), and the
// application sees the re-sent messages twice, which the client recognises
// by logical id.
func staleAfterConvergence(t *testing.T, winD *device, winS *session.Session, loseD *device, loseS *session.Session, fromLose []session.Envelope, loseText []string) {
	t.Helper()
	r := receive(t, winD, winS, fromLose[0])
	require.Nil(t, r.Rejected)
	require.NotNil(t, r.Initiator)
	require.Equal(t, loseText[0], string(r.Plaintext))
	winS = roundTrip(t, r.Session)
	require.Equal(t, 1, winS.ArchivedStates())
	r = receive(t, winD, winS, fromLose[1])
	require.Equal(t, loseText[1], string(r.Plaintext))
	require.Nil(t, r.Initiator, "a copy of the same initiation builds nothing new")
	winS = r.Session
	for _, env := range fromLose {
		require.ErrorIs(t, receiveErr(t, winD, winS, env), session.ErrReplay)
	}
	for i := range 3 {
		r := receive(t, loseD, loseS, encrypt(t, winS, msg("w", i)))
		require.Equal(t, msg("w", i), string(r.Plaintext))
		loseS = r.Session
		r = receive(t, winD, winS, encrypt(t, loseS, msg("l", i)))
		require.Equal(t, msg("l", i), string(r.Plaintext))
		winS = r.Session
	}
}

// TestInitiationsThatAreNoCollision: Receive applies the collision rule
// only to the peer's initiation against this device's own unanswered one.
// Another envelope of the initiation a record answered is decrypted by it;
// a new initiation by the peer that started the current session replaces
// it (archived), whichever address is smaller; a message without
// initiation header is decrypted by the answered initiator's session.
func TestInitiationsThatAreNoCollision(t *testing.T) {
	alice := newDevice(t, "alice", 1, 2)
	bob := newDevice(t, "bob", 1, 2)
	as, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
	require.NoError(t, err)
	first := encrypt(t, as, "1")
	second := encrypt(t, as, "2")
	bs := receive(t, bob, nil, first).Session

	// Its own initiation: decrypted, no new session, no rejection.
	r := receive(t, bob, bs, second)
	require.Equal(t, "2", string(r.Plaintext))
	require.Nil(t, r.Initiator)
	require.Nil(t, r.Rejected)
	require.Equal(t, as.InitiationID(), r.Session.InitiationID())
	bs = r.Session

	// alice (the smaller address) starts a second initiation: a
	// re-initiation, not a collision.
	as2, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
	require.NoError(t, err)
	r = receive(t, bob, bs, encrypt(t, as2, "again"))
	require.Equal(t, "again", string(r.Plaintext))
	require.Nil(t, r.Rejected)
	require.Nil(t, r.Lost)
	require.Equal(t, as2.InitiationID(), r.Session.InitiationID())
	require.Equal(t, 1, r.Session.ArchivedStates())
	bs2 := r.Session

	// No initiation header, on the initiator's side once answered.
	decrypt(t, as2, encrypt(t, bs2, "r"), "r")
	r = receive(t, alice, as2, encrypt(t, bs2, "plain"))
	require.Equal(t, "plain", string(r.Plaintext))
	require.Nil(t, r.Rejected)
}

// TestCollisionLoserFailureChangesNothing: the loser of a collision (zed
// against amy) receives the winner's initiation tampered with: it fails
// with ErrDecrypt, and neither the record nor the prekeys change; the
// genuine envelope is then answered.
func TestCollisionLoserFailureChangesNothing(t *testing.T) {
	amy := newDevice(t, "amy", 1, 1)
	zed := newDevice(t, "zed", 1, 1)
	zs, as := crossInitiate(t, zed, amy)
	env := encrypt(t, as, "hi")
	tampered := env.Clone()
	tampered.Ciphertext[0] ^= 1
	require.ErrorIs(t, receiveErr(t, zed, zs, tampered), session.ErrDecrypt)
	require.Equal(t, 1, zed.pk.OneTimeCount())
	r := receive(t, zed, zs, env)
	require.Equal(t, "hi", string(r.Plaintext))
	require.NotNil(t, r.Lost)
	require.Zero(t, zed.pk.OneTimeCount(), "the genuine one used the one-time prekey")
}
