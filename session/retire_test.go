package session_test

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

// receiveErr runs session.Receive for d and returns only its error,
// checking that neither the record nor d's prekeys changed.
func receiveErr(t testing.TB, d *device, current *session.Session, env session.Envelope) error {
	t.Helper()
	before := stateOf(t, current)
	pkBefore, err := d.pk.MarshalBinary()
	require.NoError(t, err)
	r, err := session.Receive(session.Local{Identity: d.id, Address: d.addr, Prekeys: d.pk}, current, env)
	require.Equal(t, session.Receipt{}, r)
	require.Equal(t, before, stateOf(t, current), "Receive changes nothing it is given")
	pkAfter, err2 := d.pk.MarshalBinary()
	require.NoError(t, err2)
	require.Equal(t, pkBefore, pkAfter)
	return err
}

// retiredFixture is a record of bob with zed (bob < zed) that has every
// kind of remembered initiation: zed's z1 lost a collision with bob's own
// initiation (rejected), bob's initiation was answered, then zed started
// over twice (z2, z3: answered, z2's state archived with bob's own).
type retiredFixture struct {
	bob, zed         *device
	record           *session.Session // current: z3, answered by bob
	z3               *session.Session // zed's side of the current state
	rejected         session.Envelope // z1's initiation
	answered         []session.Envelope
	afterReply       session.Envelope // z3 message without initiation header
	wantArchived     int
	wantRejected     int
	wantRetiredAfter int // base keys Retire remembers: z3, z2
}

func newRetiredFixture(t *testing.T) retiredFixture {
	t.Helper()
	bob := newDevice(t, "bob", 1, 0)
	zed := newDevice(t, "zed", 1, 0)
	own, z1 := crossInitiate(t, bob, zed)
	rejected := encrypt(t, z1, "z1 loses")
	r := receive(t, bob, own, rejected)
	require.NotNil(t, r.Rejected)
	rec := roundTrip(t, r.Session)
	// zed answers bob's initiation; bob is answered.
	zr := receive(t, zed, nil, encrypt(t, rec, "bob wins"))
	r = receive(t, bob, rec, encrypt(t, zr.Session, "answer"))
	rec = roundTrip(t, r.Session)
	require.False(t, rec.Initiating())

	var answered []session.Envelope
	var zs *session.Session
	var err error
	for _, text := range []string{"z2", "z3"} {
		zs, err = session.Initiate(rand.Reader, zed.id, zed.addr, bob.bundle())
		require.NoError(t, err)
		env := encrypt(t, zs, text)
		answered = append(answered, env)
		r = receive(t, bob, rec, env)
		require.Equal(t, text, string(r.Plaintext))
		rec = roundTrip(t, r.Session)
	}
	decrypt(t, zs, encrypt(t, rec, "reply to z3"), "reply to z3")
	require.False(t, zs.Initiating())
	after := encrypt(t, zs, "z3 after the reply")
	require.Nil(t, after.Initiation)
	require.Equal(t, 2, rec.ArchivedStates())
	rej, ret := rec.RememberedInitiations()
	require.Equal(t, 1, rej)
	require.Zero(t, ret)
	return retiredFixture{bob: bob, zed: zed, record: rec, z3: zs, rejected: rejected, answered: answered,
		afterReply: after, wantArchived: 2, wantRejected: 1, wantRetiredAfter: 2}
}

// requireRecognised checks that on record every replay of f's remembered
// initiations is recognised without building or changing anything.
func (f retiredFixture) requireRecognised(t *testing.T, record *session.Session) {
	t.Helper()
	for i, env := range f.answered {
		require.ErrorIs(t, receiveErr(t, f.bob, record, env), session.ErrReplay, "answered initiation %d", i)
	}
	r, err := session.Receive(session.Local{Identity: f.bob.id, Address: f.bob.addr, Prekeys: f.bob.pk}, record, f.rejected)
	require.NoError(t, err)
	require.NotNil(t, r.Rejected, "a rejected initiation stays rejected")
	require.Nil(t, r.Session)
	require.Nil(t, r.Initiator)
}

// TestRetire: a retired record keeps no state but recognises every
// initiation its record answered (ErrReplay) or rejected (Rejected),
// across encoding; it cannot encrypt or decrypt (ErrNoState), a message
// without initiation gets ErrNoInitiation; a new identity's initiation
// (Receive) or a new session of bob's own (Supersede) takes it over and
// still recognises the old initiations. Retire leaves its record
// unchanged.
func TestRetire(t *testing.T) {
	f := newRetiredFixture(t)
	before := stateOf(t, f.record)
	retired := roundTrip(t, f.record.Retire())
	require.Equal(t, before, stateOf(t, f.record), "Retire changes nothing it is given")
	require.False(t, retired.HasState())
	require.True(t, f.record.HasState())
	require.Zero(t, retired.ArchivedStates())
	rej, ret := retired.RememberedInitiations()
	require.Equal(t, f.wantRejected, rej)
	require.Equal(t, f.wantRetiredAfter, ret, "the answered initiations, not bob's own")
	require.Equal(t, f.bob.addr, retired.Local())
	require.Equal(t, f.zed.addr, retired.Remote())
	require.False(t, retired.Initiating())

	f.requireRecognised(t, retired)
	_, err := retired.Encrypt([]byte("x"))
	require.ErrorIs(t, err, session.ErrNoState)
	_, err = retired.Decrypt(f.afterReply)
	require.ErrorIs(t, err, session.ErrNoState)
	require.ErrorIs(t, receiveErr(t, f.bob, retired, f.afterReply), session.ErrNoInitiation)
	// Retiring a retired record keeps what it remembers.
	require.Equal(t, stateOf(t, retired), stateOf(t, retired.Retire()))

	t.Run("new identity initiates", func(t *testing.T) {
		zed2 := newDevice(t, "zed", 1, 0)
		zs, err := session.Initiate(rand.Reader, zed2.id, zed2.addr, f.bob.bundle())
		require.NoError(t, err)
		r := receive(t, f.bob, retired, encrypt(t, zs, "new zed"))
		require.Equal(t, "new zed", string(r.Plaintext))
		require.Equal(t, zed2.id.Public(), *r.Initiator)
		rec := roundTrip(t, r.Session)
		require.True(t, rec.HasState())
		require.Zero(t, rec.ArchivedStates())
		rej, ret := rec.RememberedInitiations()
		require.Equal(t, []int{f.wantRejected, f.wantRetiredAfter}, []int{rej, ret})
		f.requireRecognised(t, rec)
		talk(t, zs, rec, 2)
	})
	t.Run("bob initiates with the new identity", func(t *testing.T) {
		zed2 := newDevice(t, "zed", 1, 0)
		bs, err := session.Initiate(rand.Reader, f.bob.id, f.bob.addr, zed2.bundle())
		require.NoError(t, err)
		require.NoError(t, bs.Supersede(retired))
		rec := roundTrip(t, bs)
		require.True(t, rec.Initiating())
		f.requireRecognised(t, rec)
		zr := receive(t, zed2, nil, encrypt(t, rec, "to the new zed"))
		require.Equal(t, "to the new zed", string(zr.Plaintext))
		talk(t, zr.Session, rec, 2)
		f.requireRecognised(t, rec)
	})
}

// TestSupersede: a new session of this device's own archives the states
// of the same identity (a late message still decrypts) and refuses
// another pair's record or a record-less session.
func TestSupersede(t *testing.T) {
	f := newRetiredFixture(t)
	bs, err := session.Initiate(rand.Reader, f.bob.id, f.bob.addr, f.zed.bundle())
	require.NoError(t, err)
	before := stateOf(t, f.record)
	require.NoError(t, bs.Supersede(f.record))
	require.Equal(t, before, stateOf(t, f.record), "Supersede changes nothing of prev")
	rec := roundTrip(t, bs)
	require.Equal(t, f.wantArchived+1, rec.ArchivedStates())
	f.requireRecognised(t, rec)
	decrypt(t, rec, f.afterReply, "z3 after the reply")

	carol := store.DeviceAddress{UserID: "carol", DeviceID: 1}
	other, err := session.Initiate(rand.Reader, f.bob.id, carol, f.zed.bundle())
	require.NoError(t, err)
	tests := []struct {
		name string
		s    *session.Session
		prev *session.Session
		want error
	}{
		{"nil record", other, nil, store.ErrInvalidArgument},
		{"another pair", other, f.record, session.ErrWrongSession},
		{"no current state", f.record.Retire(), f.record, store.ErrInvalidArgument},
		{"not new: it already superseded a record", rec, f.record, store.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			was := stateOf(t, tt.s)
			require.ErrorIs(t, tt.s.Supersede(tt.prev), tt.want)
			require.Equal(t, was, stateOf(t, tt.s), "a refused Supersede changes nothing")
		})
	}
}

// TestDroppedStatesAreRemembered: states a record drops (of a remote
// identity no longer trusted, or beyond MaxArchivedStates) leave their
// base key behind, so a replay of their initiation fails with ErrReplay
// instead of being answered as a new initiation; at most
// MaxRetiredInitiations are remembered, newest first.
func TestDroppedStatesAreRemembered(t *testing.T) {
	t.Run("another identity", func(t *testing.T) {
		bob := newDevice(t, "bob", 1, 0)
		alice := newDevice(t, "alice", 1, 0)
		as, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
		require.NoError(t, err)
		first := encrypt(t, as, "old identity")
		rec := roundTrip(t, receive(t, bob, nil, first).Session)
		alice2 := newDevice(t, "alice", 1, 0)
		as2, err := session.Initiate(rand.Reader, alice2.id, alice2.addr, bob.bundle())
		require.NoError(t, err)
		rec = roundTrip(t, receive(t, bob, rec, encrypt(t, as2, "new identity")).Session)
		require.Zero(t, rec.ArchivedStates(), "the old identity's state is dropped")
		_, ret := rec.RememberedInitiations()
		require.Equal(t, 1, ret)
		require.ErrorIs(t, receiveErr(t, bob, rec, first), session.ErrReplay)
	})
	t.Run("beyond the archive", func(t *testing.T) {
		bob := newDevice(t, "bob", 1, 0)
		alice := newDevice(t, "alice", 1, 0)
		var rec *session.Session
		var firsts []session.Envelope
		n := session.MaxArchivedStates + 1 + session.MaxRetiredInitiations + 1
		for i := range n {
			as, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
			require.NoError(t, err)
			env := encrypt(t, as, msg("m", i))
			firsts = append(firsts, env)
			rec = receive(t, bob, rec, env).Session
		}
		rec = roundTrip(t, rec)
		require.Equal(t, session.MaxArchivedStates, rec.ArchivedStates())
		_, ret := rec.RememberedInitiations()
		require.Equal(t, session.MaxRetiredInitiations, ret)
		// firsts[n-1] is current, the 40 before it archived, the 41 before
		// those retired, the very first forgotten.
		for i := 1; i < n; i++ {
			require.ErrorIs(t, receiveErr(t, bob, rec, firsts[i]), session.ErrReplay, "initiation %d", i)
		}
		r, err := session.Receive(session.Local{Identity: bob.id, Address: bob.addr, Prekeys: bob.pk}, rec, firsts[0])
		require.NoError(t, err, "beyond every bound a replay is taken for a new initiation (the signed prekey's grace bounds it)")
		require.NotNil(t, r.Initiator)
		// Retire keeps the newest MaxRetiredInitiations.
		retired := roundTrip(t, rec.Retire())
		_, ret = retired.RememberedInitiations()
		require.Equal(t, session.MaxRetiredInitiations, ret)
		for i := n - session.MaxRetiredInitiations; i < n; i++ {
			require.ErrorIs(t, receiveErr(t, bob, retired, firsts[i]), session.ErrReplay, "initiation %d", i)
		}
		_, err = session.Receive(session.Local{Identity: bob.id, Address: bob.addr, Prekeys: bob.pk}, retired, firsts[n-session.MaxRetiredInitiations-1])
		require.NoError(t, err)
	})
}

// addr encodes a device address as the session record does.
func addr(a store.DeviceAddress) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(a.UserID)))
	b = append(b, a.UserID...)
	return binary.BigEndian.AppendUint64(b, uint64(a.DeviceID))
}

// TestSessionRecordVersions: a record with a state and nothing retired is
// written as version 2 (readable by earlier releases), anything else as
// version 3, unless archived states hold skipped keys (version 4, see
// TestArchivedSkippedKeysOnDecode); each encoding decodes to the same
// record, and malformed version 3 records (every bound, the state flag, a
// non-canonical form) fail with ErrMalformedState, as does a version 4
// record that version 2 or 3 encodes.
func TestSessionRecordVersions(t *testing.T) {
	f := newRetiredFixture(t)
	v2 := stateOf(t, f.record)
	require.Equal(t, byte(2), v2[4])
	retired := f.record.Retire()
	stateless := stateOf(t, retired)
	require.Equal(t, []byte{3, 0}, stateless[4:6])
	bs, err := session.Initiate(rand.Reader, f.bob.id, f.bob.addr, f.zed.bundle())
	require.NoError(t, err)
	require.NoError(t, bs.Supersede(retired))
	withState := stateOf(t, bs)
	require.Equal(t, []byte{3, 1}, withState[4:6])
	for _, b := range [][]byte{v2, stateless, withState} {
		roundTrip(t, mustSession(t, b))
	}

	head := append([]byte("SMSS\x03\x00"), append(addr(f.bob.addr), addr(f.zed.addr)...)...)
	key := bytes.Repeat([]byte{7}, session.KeySize)
	keys := func(n int) []byte {
		out := []byte{byte(n)}
		for range n {
			out = append(out, key...)
		}
		return out
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	require.NoError(t, decodeErr(cat(head, []byte{0}, keys(session.MaxRejectedInitiations), keys(session.MaxRetiredInitiations))), "every bound reached")
	bad := []struct {
		name string
		b    []byte
	}{
		{"archived state without a current state", cat(head, []byte{1}, withState[6:])},
		{"too many rejected", cat(head, []byte{0}, keys(session.MaxRejectedInitiations+1), keys(0))},
		{"too many retired", cat(head, []byte{0}, keys(0), keys(session.MaxRetiredInitiations+1))},
		{"state flag 2", cat([]byte("SMSS\x03\x02"), stateless[6:])},
		{"same local and remote", cat([]byte("SMSS\x03\x00"), addr(f.bob.addr), addr(f.bob.addr), []byte{0, 0, 0})},
		{"version 3 that version 2 encodes", cat([]byte("SMSS\x03\x01"), v2[5:], keys(0))},
		{"version 2 with retired keys", cat(v2, keys(1))},
		{"version 4 that version 3 encodes", cat([]byte("SMSS\x04"), stateless[5:])},
		{"version 4 that version 2 encodes", cat([]byte("SMSS\x04\x01"), v2[5:], keys(0))},
		{"unknown version 5", cat([]byte("SMSS\x05"), stateless[5:])},
		{"version 0", cat([]byte("SMSS\x00"), v2[5:])},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, decodeErr(tt.b), session.ErrMalformedState)
		})
	}
	for _, b := range [][]byte{stateless, withState} {
		for n := range len(b) {
			require.ErrorIs(t, decodeErr(b[:n]), session.ErrMalformedState, "prefix %d", n)
		}
		require.ErrorIs(t, decodeErr(append(bytes.Clone(b), 0)), session.ErrMalformedState, "trailing byte")
	}
}

func mustSession(t testing.TB, b []byte) *session.Session {
	t.Helper()
	s, err := session.UnmarshalSession(b)
	require.NoError(t, err)
	return s
}

func decodeErr(b []byte) error {
	_, err := session.UnmarshalSession(b)
	return err
}
