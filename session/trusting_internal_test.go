package session

import (
	"crypto/rand"
	"testing"

	"github.com/securemsg/storage/store"
	"github.com/stretchr/testify/require"
)

// TestTrustingDropsForeignArchivedStates: archived states of another
// identity are dropped and their initiations remembered as replays, the
// current state kept. No client writes such a record (archiving drops
// states of another identity), so it is built by hand: Trusting must
// still hold for a record of unknown history.
func TestTrustingDropsForeignArchivedStates(t *testing.T) {
	bob := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	zed := store.DeviceAddress{UserID: "zed", DeviceID: 1}
	bobID, err := GenerateIdentity(rand.Reader)
	require.NoError(t, err)
	bobPK, err := NewPrekeys(rand.Reader, bobID, 0)
	require.NoError(t, err)
	// answered returns bob's side of a session zed, with a new identity
	// each time, started, zed's initiation and zed's side.
	answered := func() (*Session, Envelope, *Session) {
		zid, err := GenerateIdentity(rand.Reader)
		require.NoError(t, err)
		zs, err := Initiate(rand.Reader, zid, zed, bobPK.Bundle(bob))
		require.NoError(t, err)
		env, err := zs.Encrypt([]byte("hello"))
		require.NoError(t, err)
		bs, _, err := Respond(bobID, bob, bobPK, env)
		require.NoError(t, err)
		return bs, env, zs
	}
	trusted, _, zedSide := answered()
	foreign, foreignEnv, _ := answered()
	rec := trusted.clone()
	rec.archive = []*Session{foreign}

	got := rec.Trusting(trusted.RemoteIdentity())
	require.Len(t, rec.archive, 1, "the record given is unchanged")
	require.True(t, got.HasState())
	require.Zero(t, got.ArchivedStates())
	_, rememberedRetired := got.RememberedInitiations()
	require.Equal(t, 1, rememberedRetired)
	local := Local{Identity: bobID, Address: bob, Prekeys: bobPK}
	_, err = Receive(local, got, foreignEnv)
	require.ErrorIs(t, err, ErrReplay, "the dropped state's initiation is a replay")
	next, err := zedSide.Encrypt([]byte("again"))
	require.NoError(t, err)
	r, err := Receive(local, got, next)
	require.NoError(t, err, "the kept state still decrypts")
	require.Equal(t, "again", string(r.Plaintext))
}
