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

// receive runs session.Receive for d with the record current, commits
// the receipt the way the client does (session, prekeys) and returns it.
func receive(t testing.TB, d *device, current *session.Session, env session.Envelope) session.Receipt {
	t.Helper()
	r, err := session.Receive(session.Local{Identity: d.id, Address: d.addr, Prekeys: d.pk}, current, env)
	require.NoError(t, err)
	if r.Prekeys != nil {
		d.pk = r.Prekeys
	}
	return r
}

// roundTrip encodes and decodes a record, checking the encoding is stable.
func roundTrip(t testing.TB, s *session.Session) *session.Session {
	t.Helper()
	b := stateOf(t, s)
	out, err := session.UnmarshalSession(b)
	require.NoError(t, err)
	require.Equal(t, b, stateOf(t, out))
	return out
}

// talk checks that x and y decrypt each other's messages, n each way.
func talk(t testing.TB, x, y *session.Session, n int) {
	t.Helper()
	for i := range n {
		decrypt(t, y, encrypt(t, x, msg("x", i)), msg("x", i))
		decrypt(t, x, encrypt(t, y, msg("y", i)), msg("y", i))
	}
}

// TestReplayedInitiationIsRoutedToItsState: alice's first initiation used
// no one-time prekey; she later starts over. A replay of the first
// initiation is routed by its base key to the archived state (ErrReplay,
// nothing built, nothing changed); a late genuine message of it still
// decrypts, and the live session keeps working.
func TestReplayedInitiationIsRoutedToItsState(t *testing.T) {
	alice := newDevice(t, "alice", 1, 0)
	bob := newDevice(t, "bob", 1, 0)
	as1, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
	require.NoError(t, err)
	first := encrypt(t, as1, "first")
	late := encrypt(t, as1, "late")
	r := receive(t, bob, nil, first)
	require.Equal(t, "first", string(r.Plaintext))
	require.NotNil(t, r.Initiator)
	require.Equal(t, alice.id.Public(), *r.Initiator)
	bs := roundTrip(t, r.Session)
	talk(t, as1, bs, 2)

	// alice starts over (she lost as1); bob archives the first state.
	as2, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
	require.NoError(t, err)
	r = receive(t, bob, bs, encrypt(t, as2, "again"))
	require.Equal(t, "again", string(r.Plaintext))
	require.Nil(t, r.Rejected)
	bs = roundTrip(t, r.Session)
	require.Equal(t, as2.InitiationID(), bs.InitiationID())
	require.Equal(t, 1, bs.ArchivedStates())

	before := stateOf(t, bs)
	pkBefore, err := bob.pk.MarshalBinary()
	require.NoError(t, err)
	_, err = session.Receive(session.Local{Identity: bob.id, Address: bob.addr, Prekeys: bob.pk}, bs, first)
	require.ErrorIs(t, err, session.ErrReplay)
	require.Equal(t, before, stateOf(t, bs), "a replayed initiation changes nothing")
	pkAfter, err := bob.pk.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, pkBefore, pkAfter)

	// A late message of the archived state decrypts; as2 stays current.
	// The record given to Receive is not modified (archived states are
	// shared between copies of a record).
	r = receive(t, bob, bs, late)
	require.Equal(t, "late", string(r.Plaintext))
	require.Equal(t, before, stateOf(t, bs), "Receive changes nothing it is given")
	require.Nil(t, r.Initiator)
	bs = roundTrip(t, r.Session)
	require.Equal(t, as2.InitiationID(), bs.InitiationID())
	_, err = session.Receive(session.Local{Identity: bob.id, Address: bob.addr, Prekeys: bob.pk}, bs, late)
	require.ErrorIs(t, err, session.ErrReplay)
	talk(t, as2, bs, 3)
	// as1, still held by alice, is answered from the archive too.
	r = receive(t, bob, bs, encrypt(t, as1, "old chain"))
	require.Equal(t, "old chain", string(r.Plaintext))
}

// TestArchiveIsBounded: a record keeps at most MaxArchivedStates previous
// states, newest first, across encoding.
func TestArchiveIsBounded(t *testing.T) {
	alice := newDevice(t, "alice", 1, 0)
	bob := newDevice(t, "bob", 1, 0)
	var bs *session.Session
	var inits []session.InitiationID
	for i := range session.MaxArchivedStates + 5 {
		as, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
		require.NoError(t, err)
		inits = append(inits, as.InitiationID())
		r := receive(t, bob, bs, encrypt(t, as, msg("m", i)))
		bs = roundTrip(t, r.Session)
	}
	require.Equal(t, session.MaxArchivedStates, bs.ArchivedStates())
	require.Equal(t, inits[len(inits)-1], bs.InitiationID())
}

// TestRejectedInitiationIsRemembered: the losing initiation of a
// collision is rejected after it authenticated, its base key is
// remembered, and a later copy is rejected without building anything.
// A forged initiation is not rejected as a loser: it fails to decrypt.
func TestRejectedInitiationIsRemembered(t *testing.T) {
	alice := newDevice(t, "alice", 1, 2)
	bob := newDevice(t, "bob", 1, 2)
	as, bsInit := crossInitiate(t, alice, bob)
	fromBob := encrypt(t, bsInit, "loses")

	forged := fromBob.Clone()
	forged.Initiation.Ephemeral[0] ^= 1
	_, err := session.Receive(session.Local{Identity: alice.id, Address: alice.addr, Prekeys: alice.pk}, as, forged)
	require.ErrorIs(t, err, session.ErrDecrypt)

	r := receive(t, alice, as, fromBob)
	require.NotNil(t, r.Rejected)
	require.Equal(t, bsInit.InitiationID(), *r.Rejected)
	require.Nil(t, r.Plaintext)
	require.Nil(t, r.Prekeys, "no prekey consumed")
	require.NotNil(t, r.Session)
	as = roundTrip(t, r.Session)
	require.True(t, as.Initiating())

	again := receive(t, alice, as, fromBob)
	require.NotNil(t, again.Rejected)
	require.Nil(t, again.Session, "a known rejected initiation changes nothing")
	require.Nil(t, again.Initiator)

	// bob adopts alice's initiation; once alice is answered, a stale copy
	// of bob's losing initiation is still rejected.
	r = receive(t, bob, bsInit, encrypt(t, as, "wins"))
	require.Equal(t, "wins", string(r.Plaintext))
	require.NotNil(t, r.Lost)
	bs := r.Session
	decrypt(t, as, encrypt(t, bs, "reply"), "reply")
	require.False(t, as.Initiating())
	again = receive(t, alice, as, fromBob)
	require.NotNil(t, again.Rejected)
	require.Nil(t, again.Session)
	talk(t, as, bs, 2)
}

// TestRejectedInitiationCopiesAreAuthenticated: a copy of a rejected
// initiation is authenticated before it is rejected again, as its first
// copy was: a forged copy (the rejected base key, a ciphertext of the
// forger's) fails with ErrDecrypt, and a copy whose one-time prekey was
// consumed since fails with ErrUnknownPrekey; neither changes anything,
// and a genuine copy is still rejected.
func TestRejectedInitiationCopiesAreAuthenticated(t *testing.T) {
	alice := newDevice(t, "alice", 1, 2)
	bob := newDevice(t, "bob", 1, 2)
	as, bsInit := crossInitiate(t, alice, bob)
	fromBob := encrypt(t, bsInit, "loses")
	r := receive(t, alice, as, fromBob)
	require.NotNil(t, r.Rejected)
	as = roundTrip(t, r.Session)

	forged := fromBob.Clone()
	forged.Ciphertext[0] ^= 1
	require.ErrorIs(t, receiveErr(t, alice, as, forged), session.ErrDecrypt)
	again := receive(t, alice, as, fromBob)
	require.NotNil(t, again.Rejected)
	require.Nil(t, again.Session)

	// carol's initiation uses the one-time prekey bob's used.
	carol := newDevice(t, "carol", 1, 0)
	cs, err := session.Initiate(rand.Reader, carol.id, carol.addr, alice.bundle())
	require.NoError(t, err)
	receive(t, alice, nil, encrypt(t, cs, "hi"))
	require.ErrorIs(t, receiveErr(t, alice, as, fromBob), session.ErrUnknownPrekey)
}

// TestReinitiationAfterStateLoss: the peer that lost its session starts a
// new one; whichever address is smaller and whoever started the lost
// session, the survivor accepts the new authenticated initiation (the old
// state archived) and both directions work. The case that matters most
// is a survivor that initiated the lost session meeting a new initiation
// from the greater address: refusing it would cut the two off for good.
func TestReinitiationAfterStateLoss(t *testing.T) {
	small := store.DeviceAddress{UserID: "alice", DeviceID: 1}
	great := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	tests := []struct {
		name              string
		survivor, loser   store.DeviceAddress
		survivorInitiated bool
	}{
		{"greater loses, survivor initiated", small, great, true},
		{"greater loses, loser initiated", small, great, false},
		{"smaller loses, survivor initiated", great, small, true},
		{"smaller loses, loser initiated", great, small, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sv := newDevice(t, tt.survivor.UserID, tt.survivor.DeviceID, 2)
			ls := newDevice(t, tt.loser.UserID, tt.loser.DeviceID, 2)
			var svs *session.Session
			if tt.survivorInitiated {
				s, err := session.Initiate(rand.Reader, sv.id, sv.addr, ls.bundle())
				require.NoError(t, err)
				r := receive(t, ls, nil, encrypt(t, s, "hello"))
				decrypt(t, s, encrypt(t, r.Session, "reply"), "reply")
				svs = s
			} else {
				s, err := session.Initiate(rand.Reader, ls.id, ls.addr, sv.bundle())
				require.NoError(t, err)
				r := receive(t, sv, nil, encrypt(t, s, "hello"))
				svs = r.Session
				decrypt(t, s, encrypt(t, svs, "reply"), "reply")
			}
			require.False(t, svs.Initiating())

			// The loser lost its state and initiates again.
			again, err := session.Initiate(rand.Reader, ls.id, ls.addr, sv.bundle())
			require.NoError(t, err)
			r := receive(t, sv, svs, encrypt(t, again, "i am back"))
			require.Nil(t, r.Rejected)
			require.Equal(t, "i am back", string(r.Plaintext))
			require.Equal(t, ls.id.Public(), *r.Initiator)
			require.Equal(t, again.InitiationID(), r.Session.InitiationID())
			require.Equal(t, 1, r.Session.ArchivedStates())
			talk(t, roundTrip(t, r.Session), again, 3)
		})
	}
}

// TestVersion1RecordStillDecodes: a record stored before archives existed
// (version 1: one state, no counts) decodes to the same state with an
// empty archive.
func TestVersion1RecordStillDecodes(t *testing.T) {
	_, _, _, bs := confirmed(t)
	v2 := stateOf(t, bs)
	require.Equal(t, []byte{0, 0}, v2[len(v2)-2:], "empty archive and rejected keys")
	v1 := append([]byte{}, v2[:len(v2)-2]...)
	require.Equal(t, byte(2), v1[4])
	v1[4] = 1
	s, err := session.UnmarshalSession(v1)
	require.NoError(t, err)
	require.Equal(t, v2, stateOf(t, s))
	require.Zero(t, s.ArchivedStates())
	_, err = session.UnmarshalSession(append(v1, 0, 0))
	require.ErrorIs(t, err, session.ErrMalformedState, "a version 1 record has no counts")
}

// TestRecordWithArchiveRejectsGarbage: a record with archived states and
// rejected base keys round-trips; every truncation and a trailing byte are
// refused with ErrMalformedState.
func TestRecordWithArchiveRejectsGarbage(t *testing.T) {
	alice := newDevice(t, "alice", 1, 0)
	bob := newDevice(t, "bob", 1, 0)
	var bs *session.Session
	for i := range 3 {
		as, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
		require.NoError(t, err)
		bs = receive(t, bob, bs, encrypt(t, as, msg("m", i))).Session
	}
	// A collision amy wins: her record remembers zed's base key.
	amy := newDevice(t, "amy", 1, 0)
	zed := newDevice(t, "zed", 1, 0)
	as, zs := crossInitiate(t, amy, zed)
	r := receive(t, amy, as, encrypt(t, zs, "loses"))
	require.NotNil(t, r.Rejected)

	for _, rec := range []*session.Session{bs, r.Session} {
		b := stateOf(t, roundTrip(t, rec))
		for n := range len(b) {
			_, err := session.UnmarshalSession(b[:n])
			require.ErrorIs(t, err, session.ErrMalformedState, "prefix %d", n)
		}
		_, err := session.UnmarshalSession(append(b, 0))
		require.ErrorIs(t, err, session.ErrMalformedState)
	}
	require.Equal(t, 2, roundTrip(t, bs).ArchivedStates())
}

// TestRejectedInitiationsAreBounded: a record remembers the base keys of
// at most MaxRejectedInitiations rejected initiations, newest first: a
// copy of the oldest, forgotten, is authenticated and rejected again
// (and remembered again), a copy of a remembered one changes nothing.
func TestRejectedInitiationsAreBounded(t *testing.T) {
	amy := newDevice(t, "amy", 1, 0)
	zed := newDevice(t, "zed", 1, 0)
	as, err := session.Initiate(rand.Reader, amy.id, amy.addr, zed.bundle())
	require.NoError(t, err)
	var losers []session.Envelope
	for i := range session.MaxRejectedInitiations + 1 {
		zs, err := session.Initiate(rand.Reader, zed.id, zed.addr, amy.bundle())
		require.NoError(t, err)
		env := encrypt(t, zs, msg("loses", i))
		losers = append(losers, env)
		r := receive(t, amy, as, env)
		require.NotNil(t, r.Rejected)
		require.NotNil(t, r.Session, "a new rejected initiation is remembered")
		as = roundTrip(t, r.Session)
	}
	size := len(stateOf(t, as))

	again := receive(t, amy, as, losers[1])
	require.NotNil(t, again.Rejected)
	require.Nil(t, again.Session, "the oldest remembered changes nothing")

	again = receive(t, amy, as, losers[0])
	require.NotNil(t, again.Rejected)
	require.NotNil(t, again.Session, "the forgotten one is remembered again")
	require.Equal(t, size, len(stateOf(t, again.Session)), "still at most MaxRejectedInitiations")
	require.True(t, again.Session.Initiating())
}

// TestRecordBoundsOnDecode: a stored record is checked before use: at
// most MaxArchivedStates archived states, at most MaxRejectedInitiations
// rejected base keys, at most MaxSkippedKeys skipped keys in a state, and
// archived states of the record's own pair of devices only; anything else
// is refused with ErrMalformedState. Archived states over
// MaxArchivedSkippedKeys skipped keys together (version 2 here, written
// by an earlier release) are trimmed to it.
func TestRecordBoundsOnDecode(t *testing.T) {
	_, _, as, bs := confirmed(t)
	rec := stateOf(t, bs) // magic, version, state, 0 archived, 0 rejected
	state := rec[5 : len(rec)-2]
	other := stateOf(t, as)
	otherState := other[5 : len(other)-2] // alice -> bob instead of bob -> alice
	// A state of the same pair with MaxSkippedKeys skipped keys, and one
	// with a key more.
	_, _, fa, fb := confirmed(t)
	for range session.MaxSkippedKeys / session.MaxSkip {
		for range session.MaxSkip {
			_, err := fa.Encrypt([]byte("lost"))
			require.NoError(t, err)
		}
		decrypt(t, fb, encrypt(t, fa, "arrives"), "arrives")
	}
	require.Equal(t, session.MaxSkippedKeys, first(fb.SkippedKeys()))
	fullRec := stateOf(t, fb)
	full := fullRec[5 : len(fullRec)-2]
	overfull := append(bytes.Clone(full), make([]byte, 68)...)
	at := len(full) - session.MaxSkippedKeys*68 - 2 // the u16 count
	binary.BigEndian.PutUint16(overfull[at:], session.MaxSkippedKeys+1)
	build := func(archived [][]byte, rejected int) []byte {
		b := append([]byte{}, rec[:len(rec)-2]...)
		b = append(b, byte(len(archived)))
		for _, a := range archived {
			b = append(b, a...)
		}
		b = append(b, byte(rejected))
		return append(b, make([]byte, rejected*session.KeySize)...)
	}
	repeat := func(s []byte, n int) [][]byte {
		out := make([][]byte, n)
		for i := range out {
			out[i] = s
		}
		return out
	}
	tests := []struct {
		name     string
		archived [][]byte
		rejected int
		ok       bool
		skipped  int // archived skipped keys after decoding
	}{
		{"archive and rejected keys at their bounds", repeat(state, session.MaxArchivedStates), session.MaxRejectedInitiations, true, 0},
		{"one archived state too many", repeat(state, session.MaxArchivedStates+1), 0, false, 0},
		{"one rejected key too many", nil, session.MaxRejectedInitiations + 1, false, 0},
		{"archived state of another pair", [][]byte{state, otherState}, 0, false, 0},
		{"skipped keys of a state and of the archive at their bounds", [][]byte{full}, 0, true, session.MaxArchivedSkippedKeys},
		{"archived skipped keys over their bound are trimmed", [][]byte{full, full, state}, 0, true, session.MaxArchivedSkippedKeys},
		{"one skipped key too many in a state", [][]byte{overfull}, 0, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := session.UnmarshalSession(build(tt.archived, tt.rejected))
			if !tt.ok {
				require.ErrorIs(t, err, session.ErrMalformedState)
				return
			}
			require.NoError(t, err)
			require.Equal(t, len(tt.archived), s.ArchivedStates())
			current, archived := s.SkippedKeys()
			require.Zero(t, current)
			require.Equal(t, tt.skipped, archived)
		})
	}
}

// first returns the first of two values.
func first(a, _ int) int { return a }

// TestArchiveKeepsOnlyTheNewIdentitysStates: when an initiation of
// another identity for the same address replaces the session (the client
// lets it only after the identity change is accepted), the previous
// identity's states are not archived: a late message of the old identity's
// session no longer decrypts, while the new one works.
func TestArchiveKeepsOnlyTheNewIdentitysStates(t *testing.T) {
	alice := newDevice(t, "alice", 1, 0)
	bob := newDevice(t, "bob", 1, 0)
	old, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
	require.NoError(t, err)
	bs := receive(t, bob, nil, encrypt(t, old, "first")).Session
	decrypt(t, old, encrypt(t, bs, "reply"), "reply") // answered: no header
	late := encrypt(t, old, "late")
	require.Nil(t, late.Initiation)
	require.Zero(t, bs.ArchivedStates())

	reinstalled := newDevice(t, "alice", 1, 0) // same address, new identity
	s, err := session.Initiate(rand.Reader, reinstalled.id, reinstalled.addr, bob.bundle())
	require.NoError(t, err)
	r := receive(t, bob, bs, encrypt(t, s, "new identity"))
	require.Equal(t, reinstalled.id.Public(), *r.Initiator)
	require.Zero(t, r.Session.ArchivedStates(), "the old identity's state is not archived")
	bs = roundTrip(t, r.Session)

	_, err = session.Receive(session.Local{Identity: bob.id, Address: bob.addr, Prekeys: bob.pk}, bs, late)
	require.ErrorIs(t, err, session.ErrDecrypt, "a late message of the old identity's session")
	talk(t, s, bs, 2)
}

// TestReceiveRefusesWhatIsNotItsOwn: Receive checks its arguments before
// anything else: an envelope for another device, a record of another pair
// of devices, a message without a session and missing keys are refused
// with their error, and the record and prekeys given stay unchanged.
func TestReceiveRefusesWhatIsNotItsOwn(t *testing.T) {
	alice, bob, as, bs := confirmed(t)
	carol := newDevice(t, "carol", 1, 1)
	cs, err := session.Initiate(rand.Reader, carol.id, carol.addr, bob.bundle())
	require.NoError(t, err)
	fromAlice := encrypt(t, as, "for bob")
	fromCarol := encrypt(t, cs, "carol's initiation")
	local := session.Local{Identity: bob.id, Address: bob.addr, Prekeys: bob.pk}
	tests := []struct {
		name    string
		local   session.Local
		current *session.Session
		env     session.Envelope
		want    error
	}{
		{"envelope for another device", session.Local{Identity: alice.id, Address: alice.addr, Prekeys: alice.pk}, as, fromAlice, session.ErrWrongSession},
		{"record of another pair", local, bs, fromCarol, session.ErrWrongSession},
		{"message without a session", local, nil, fromAlice, session.ErrNoInitiation},
		{"no prekeys", session.Local{Identity: bob.id, Address: bob.addr}, bs, fromAlice, store.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before []byte
			if tt.current != nil {
				before = stateOf(t, tt.current)
			}
			pkBefore, err := bob.pk.MarshalBinary()
			require.NoError(t, err)
			_, err = session.Receive(tt.local, tt.current, tt.env)
			require.ErrorIs(t, err, tt.want)
			if tt.current != nil {
				require.Equal(t, before, stateOf(t, tt.current))
			}
			pkAfter, err := bob.pk.MarshalBinary()
			require.NoError(t, err)
			require.Equal(t, pkBefore, pkAfter)
		})
	}
	// bs still answers alice; the record given is not advanced in place.
	before := stateOf(t, bs)
	r := receive(t, bob, bs, fromAlice)
	require.Equal(t, "for bob", string(r.Plaintext))
	require.Equal(t, before, stateOf(t, bs), "Receive changes nothing it is given")
	require.NotEqual(t, before, stateOf(t, r.Session))
}
