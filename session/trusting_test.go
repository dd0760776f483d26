package session_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/session"
)

// TestTrusting: a record whose states are all of the trusted identity is
// kept as it is; a record whose current state is of another identity (a
// stored record put back from before an accepted identity change) is
// retired: no state to encrypt or decrypt with, and every initiation it
// answered or rejected still recognised. The record given is unchanged.
func TestTrusting(t *testing.T) {
	f := newRetiredFixture(t)
	t.Run("every state of the trusted identity", func(t *testing.T) {
		require.Same(t, f.record, f.record.Trusting(f.zed.id.Public()))
	})
	t.Run("current state of another identity", func(t *testing.T) {
		before := stateOf(t, f.record)
		replaced := newDevice(t, f.zed.addr.UserID, f.zed.addr.DeviceID, 0)
		r := f.record.Trusting(replaced.id.Public())
		require.Equal(t, before, stateOf(t, f.record), "the record given is unchanged")
		require.False(t, r.HasState())
		require.Zero(t, r.ArchivedStates())
		require.Zero(t, r.Initiator(), "no state: no initiator")
		_, err := r.Encrypt([]byte("to the replaced identity"))
		require.ErrorIs(t, err, session.ErrNoState)
		require.ErrorIs(t, receiveErr(t, f.bob, r, f.afterReply), session.ErrNoInitiation)
		f.requireRecognised(t, r)
		f.requireRecognised(t, roundTrip(t, r))
	})
}
