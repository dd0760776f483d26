package session_test

import (
	"crypto/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/session"
)

func TestCollisionWinner(t *testing.T) {
	a := ids.DeviceAddress{UserID: "alice", DeviceID: 2}
	b := ids.DeviceAddress{UserID: "bob", DeviceID: 1}
	a1 := ids.DeviceAddress{UserID: "alice", DeviceID: 1}
	require.Equal(t, a, session.CollisionWinner(a, b))
	require.Equal(t, a, session.CollisionWinner(b, a))
	require.Equal(t, a1, session.CollisionWinner(a, a1))
	require.Equal(t, a1, session.CollisionWinner(a1, a))
}

// TestSimultaneousInitiation: both devices initiate and send before either
// received the other's first envelope. Whatever the delivery order, both
// converge on the initiation of the smaller address, the loser re-sends
// what it sent on the losing initiation, and both directions work.
func TestSimultaneousInitiation(t *testing.T) {
	tests := []struct {
		name       string
		x, y       ids.DeviceAddress
		staleLater bool // the winner gets the loser's re-sent messages before its stale initiation envelopes
	}{
		{"x smaller", ids.DeviceAddress{UserID: "alice", DeviceID: 1}, ids.DeviceAddress{UserID: "bob", DeviceID: 1}, false},
		{"y smaller", ids.DeviceAddress{UserID: "zoe", DeviceID: 1}, ids.DeviceAddress{UserID: "bob", DeviceID: 9}, false},
		{"same user, other device", ids.DeviceAddress{UserID: "carol", DeviceID: 5}, ids.DeviceAddress{UserID: "carol", DeviceID: 3}, false},
		{"stale initiation after convergence", ids.DeviceAddress{UserID: "alice", DeviceID: 1}, ids.DeviceAddress{UserID: "bob", DeviceID: 1}, true},
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

			// Decrypt refuses a foreign initiation: the client must resolve.
			_, err = winS.Decrypt(fromLose[0])
			require.ErrorIs(t, err, session.ErrWrongSession)

			// The loser receives the winner's initiation.
			_, err = loseS.Decrypt(fromWin[0])
			require.ErrorIs(t, err, session.ErrWrongSession)
			loseBefore := stateOf(t, loseS)
			res, err := session.ResolveCollision(loseD.id, loseD.pk, loseS, fromWin[0])
			require.NoError(t, err)
			require.Equal(t, session.TheirsWon, res.Outcome)
			require.Equal(t, winText[0], string(res.Plaintext))
			require.NotNil(t, res.Lost)
			require.Equal(t, loseInit, res.Lost.InitiationID)
			require.Equal(t, winD.addr, res.Lost.Remote)
			require.Equal(t, []uint32{0, 1}, res.Lost.MessageNumbers)
			require.Equal(t, loseBefore, stateOf(t, loseS), "the losing session is not modified")
			loseS = res.Winner
			require.Equal(t, winInit, loseS.InitiationID())
			require.Equal(t, winD.addr, loseS.Initiator())
			require.False(t, loseS.Initiating())
			decrypt(t, loseS, fromWin[1], winText[1])

			// The loser re-sends what the lost initiation carried.
			var resent []session.Envelope
			for _, n := range res.Lost.MessageNumbers {
				env := encrypt(t, loseS, loseText[n])
				require.Nil(t, env.Initiation)
				resent = append(resent, env)
			}

			// The winner rejects the losing initiation, on every envelope of it,
			// before or after it received the re-sent messages.
			checkRejected := func(env session.Envelope) {
				t.Helper()
				before := stateOf(t, winS)
				pkBefore := winD.pk.OneTimeCount()
				r, err := session.ResolveCollision(winD.id, winD.pk, winS, env)
				require.NoError(t, err)
				require.Equal(t, session.OursWon, r.Outcome)
				require.Same(t, winS, r.Winner)
				require.Equal(t, loseInit, r.Rejected)
				require.Nil(t, r.Lost)
				require.Nil(t, r.Plaintext)
				require.Equal(t, before, stateOf(t, winS))
				require.Equal(t, pkBefore, winD.pk.OneTimeCount(), "no prekey consumed")
			}
			if !tt.staleLater {
				checkRejected(fromLose[0])
			}
			require.True(t, winS.Initiating())
			for i, env := range resent {
				decrypt(t, winS, env, loseText[i])
			}
			require.False(t, winS.Initiating())
			checkRejected(fromLose[1])
			if tt.staleLater {
				checkRejected(fromLose[0])
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

func TestResolveCollisionNotColliding(t *testing.T) {
	alice := newDevice(t, "alice", 1, 2)
	bob := newDevice(t, "bob", 1, 2)
	as, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
	require.NoError(t, err)
	first := encrypt(t, as, "1")
	second := encrypt(t, as, "2")
	bs, _, err := session.Respond(bob.id, bob.addr, bob.pk, first)
	require.NoError(t, err)

	// Its own initiation: not a collision, just Decrypt.
	_, err = session.ResolveCollision(bob.id, bob.pk, bs, second)
	require.ErrorIs(t, err, session.ErrNotColliding)

	// Alice starts a second initiation while bob responds to the first:
	// a re-initiation by the same initiator, left to the client.
	as2, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
	require.NoError(t, err)
	_, err = session.ResolveCollision(bob.id, bob.pk, bs, encrypt(t, as2, "again"))
	require.ErrorIs(t, err, session.ErrNotColliding)

	// No initiation header.
	decrypt(t, bs, second, "2")
	decrypt(t, as, encrypt(t, bs, "r"), "r")
	_, err = session.ResolveCollision(alice.id, alice.pk, as, encrypt(t, bs, "plain"))
	require.ErrorIs(t, err, session.ErrNoInitiation)
}

func TestResolveCollisionRespondFailureChangesNothing(t *testing.T) {
	// zed loses against amy; amy's initiation names a consumed prekey.
	amy := newDevice(t, "amy", 1, 1)
	zed := newDevice(t, "zed", 1, 1)
	zs, err := session.Initiate(rand.Reader, zed.id, zed.addr, amy.bundle())
	require.NoError(t, err)
	as, err := session.Initiate(rand.Reader, amy.id, amy.addr, zed.bundle())
	require.NoError(t, err)
	env := encrypt(t, as, "hi")
	env.Ciphertext[0] ^= 1
	before := stateOf(t, zs)
	_, err = session.ResolveCollision(zed.id, zed.pk, zs, env)
	require.ErrorIs(t, err, session.ErrDecrypt)
	require.Equal(t, before, stateOf(t, zs))
	require.Equal(t, 1, zed.pk.OneTimeCount())
}
