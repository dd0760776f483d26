package session_test

import (
	"bytes"
	"crypto/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

// lossy is a session alice started with bob, and the envelopes of it
// that never reached bob, oldest first: bob's state keeps their skipped
// keys, or evicted them.
type lossy struct {
	as   *session.Session
	lost []session.Envelope
}

// lose makes l.as send n envelopes that never reach bob, each run of at
// most MaxSkip followed by one that reaches bob's record rec, and returns
// bob's record after them.
func (l *lossy) lose(t testing.TB, bob *device, rec *session.Session, n int) *session.Session {
	t.Helper()
	for n > 0 {
		gap := min(n, session.MaxSkip)
		for range gap {
			l.lost = append(l.lost, encrypt(t, l.as, msg("lost", len(l.lost))))
		}
		rec = receiveBounded(t, bob, rec, encrypt(t, l.as, "arrives"))
		n -= gap
	}
	return rec
}

// startWithLosses makes alice start a new session with bob, whose record
// is rec (nil for none): its first envelope reaches bob, then lost
// envelopes do not, then one more does.
func startWithLosses(t testing.TB, alice, bob *device, rec *session.Session, lost int) (*session.Session, *lossy) {
	t.Helper()
	as, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
	require.NoError(t, err)
	rec = receiveBounded(t, bob, rec, encrypt(t, as, "start"))
	l := &lossy{as: as}
	return l.lose(t, bob, rec, lost), l
}

// receiveBounded is receive, checking that the new record respects the
// bound of the archived states' skipped keys and survives encoding.
func receiveBounded(t testing.TB, d *device, rec *session.Session, env session.Envelope) *session.Session {
	t.Helper()
	next := roundTrip(t, receive(t, d, rec, env).Session)
	_, archived := next.SkippedKeys()
	require.LessOrEqual(t, archived, session.MaxArchivedSkippedKeys)
	return next
}

// requireKept checks that bob's record rec keeps the skipped keys of the
// last kept envelopes l lost and evicted those before: an evicted one
// fails with ErrReplay and changes nothing, a kept one decrypts. It
// checks both ends of each part.
func requireKept(t testing.TB, bob *device, rec *session.Session, l *lossy, kept int) {
	t.Helper()
	evicted := len(l.lost) - kept
	for _, i := range []int{0, evicted - 1, evicted, len(l.lost) - 1} {
		if i < 0 || i >= len(l.lost) {
			continue
		}
		if i < evicted {
			require.ErrorIs(t, receiveErr(t, bob, rec, l.lost[i]), session.ErrReplay, "lost envelope %d was evicted", i)
			continue
		}
		r := receive(t, bob, rec, l.lost[i])
		require.Equal(t, msg("lost", i), string(r.Plaintext), "lost envelope %d is kept", i)
	}
}

func sum(ns []int) int {
	total := 0
	for _, n := range ns {
		total += n
	}
	return total
}

// TestArchivingBoundsArchivedSkippedKeys: when a state is archived, the
// archived states keep at most MaxArchivedSkippedKeys skipped keys
// together, evicting the oldest state's first, each state's oldest first;
// a late envelope whose key was evicted fails with ErrReplay. The current
// state keeps its own MaxSkippedKeys; the record given to Receive is not
// trimmed.
func TestArchivingBoundsArchivedSkippedKeys(t *testing.T) {
	tests := []struct {
		name string
		// archived: envelopes lost in each state, oldest first, all
		// archived at the end; current: those lost in the current state.
		archived []int
		current  int
		// kept: skipped keys each archived state keeps, oldest first.
		kept []int
	}{
		{"at the bound nothing is evicted", []int{700, 600, 700}, 0, []int{700, 600, 700}},
		{"the oldest state's oldest keys go first", []int{1000, 1000, 500}, 0, []int{500, 1000, 500}},
		{"older states go whole before a newer one loses a key", []int{400, 300, 1000, 1000}, 0, []int{0, 0, 1000, 1000}},
		{"the state just replaced keeps all its keys", []int{1000, session.MaxSkippedKeys}, session.MaxSkippedKeys, []int{0, session.MaxSkippedKeys}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			alice := newDevice(t, "alice", 1, 0)
			bob := newDevice(t, "bob", 1, 0)
			var rec *session.Session
			var states []*lossy
			for _, n := range tt.archived {
				var l *lossy
				rec, l = startWithLosses(t, alice, bob, rec, n)
				states = append(states, l)
			}
			before, beforeBytes := rec, stateOf(t, rec)
			rec, cur := startWithLosses(t, alice, bob, rec, tt.current)
			require.Equal(t, beforeBytes, stateOf(t, before), "Receive changes nothing it is given")
			require.Equal(t, len(tt.archived), rec.ArchivedStates())
			current, archived := rec.SkippedKeys()
			require.Equal(t, tt.current, current, "the current state keeps its own keys")
			require.Equal(t, sum(tt.kept), archived)
			for i, l := range states {
				requireKept(t, bob, rec, l, tt.kept[i])
			}
			requireKept(t, bob, rec, cur, tt.current)
			decrypt(t, cur.as, encrypt(t, rec, "the current state works"), "the current state works")
		})
	}
}

// TestLateMessagesBoundArchivedSkippedKeys: an archived state that
// decrypts a late envelope after a gap stores the skipped keys, and the
// archived states still keep at most MaxArchivedSkippedKeys together, the
// oldest state's oldest evicted first, even when that is the state that
// stored them. The record given to Receive keeps every key it had.
func TestLateMessagesBoundArchivedSkippedKeys(t *testing.T) {
	tests := []struct {
		name string
		late int // which archived state, oldest first, gets late envelopes
		more int // envelopes it loses before one of them arrives
		kept []int
	}{
		{"a newer state's new keys evict the oldest state's", 1, 500, []int{500, 1500}},
		{"the oldest state evicts its own oldest keys", 0, 500, []int{1000, 1000}},
		{"under the bound nothing is evicted", 1, 0, []int{1000, 1000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			alice := newDevice(t, "alice", 1, 0)
			bob := newDevice(t, "bob", 1, 0)
			var rec *session.Session
			var states []*lossy
			for range 2 {
				var l *lossy
				rec, l = startWithLosses(t, alice, bob, rec, 1000)
				states = append(states, l)
			}
			rec, cur := startWithLosses(t, alice, bob, rec, 0)
			_, archived := rec.SkippedKeys()
			require.Equal(t, session.MaxArchivedSkippedKeys, archived)

			before := rec
			beforeBytes := stateOf(t, before)
			rec = states[tt.late].lose(t, bob, rec, tt.more)
			if tt.more == 0 { // one late envelope, no gap
				rec = receiveBounded(t, bob, rec, encrypt(t, states[tt.late].as, "arrives"))
			}
			require.Equal(t, 2, rec.ArchivedStates())
			current, archived := rec.SkippedKeys()
			require.Zero(t, current)
			require.Equal(t, sum(tt.kept), archived)
			for i, l := range states {
				requireKept(t, bob, rec, l, tt.kept[i])
			}
			require.Equal(t, beforeBytes, stateOf(t, before), "Receive changes nothing it is given")
			requireKept(t, bob, before, &lossy{as: states[0].as, lost: states[0].lost[:1000]}, 1000)
			decrypt(t, cur.as, encrypt(t, rec, "the current state works"), "the current state works")
		})
	}
}

// TestArchivedSkippedKeysOnDecode: a version 2 or 3 record (an earlier
// release bounded each state only) whose archived states hold more than
// MaxArchivedSkippedKeys skipped keys is trimmed on decode, the oldest
// state's oldest first, and written again as version 4; a version 4
// record over the bound, which MarshalBinary cannot write, is refused
// with ErrMalformedState, as is one without archived skipped keys (which
// version 2 or 3 encodes).
func TestArchivedSkippedKeysOnDecode(t *testing.T) {
	alice := newDevice(t, "alice", 1, 0)
	bob := newDevice(t, "bob", 1, 0)
	// solo returns the encoding of bob's state of a new session of
	// alice's alone, after lost envelopes, and the session.
	solo := func(lost int) ([]byte, *lossy) {
		as, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
		require.NoError(t, err)
		bs, _, err := session.Respond(bob.id, bob.addr, bob.pk, encrypt(t, as, "start"))
		require.NoError(t, err)
		l := &lossy{as: as}
		raw := stateOf(t, l.lose(t, bob, bs, lost))
		require.Equal(t, byte(2), raw[4])
		require.Equal(t, []byte{0, 0}, raw[len(raw)-2:], "no archived state, no rejected key")
		return raw[5 : len(raw)-2], l
	}
	cur, _ := solo(0)
	empty, _ := solo(0)
	oldest, a := solo(1000)
	middle, b := solo(1000)
	newest, c := solo(500)
	single, _ := solo(1)
	retiredKey := bytes.Repeat([]byte{7}, session.KeySize)
	// record assembles a record of the current state and the archived
	// ones, newest first, as version 2, 3 (with one retired key, as
	// version 3 needs) or 4 (none).
	record := func(version byte, archived ...[]byte) []byte {
		out := append([]byte("SMSS"), version)
		if version >= 3 {
			out = append(out, 1)
		}
		out = append(out, cur...)
		out = append(out, byte(len(archived)))
		for _, s := range archived {
			out = append(out, s...)
		}
		out = append(out, 0) // rejected
		switch version {
		case 3:
			out = append(append(out, 1), retiredKey...)
		case 4:
			out = append(out, 0)
		}
		return out
	}

	trimmed := []struct {
		name    string
		version byte
	}{{"version 2", 2}, {"version 3", 3}}
	for _, tt := range trimmed {
		t.Run(tt.name+" over the bound is trimmed", func(t *testing.T) {
			raw := record(tt.version, newest, middle, oldest)
			rec, err := session.UnmarshalSession(raw)
			require.NoError(t, err)
			require.Equal(t, 3, rec.ArchivedStates())
			current, archived := rec.SkippedKeys()
			require.Zero(t, current)
			require.Equal(t, session.MaxArchivedSkippedKeys, archived)
			requireKept(t, bob, rec, a, 500)
			requireKept(t, bob, rec, b, 1000)
			requireKept(t, bob, rec, c, 500)
			out := stateOf(t, roundTrip(t, rec))
			require.Equal(t, byte(4), out[4], "written again as version 4")
		})
	}
	t.Run("version 2 at the bound keeps every key", func(t *testing.T) {
		rec, err := session.UnmarshalSession(record(2, middle, oldest))
		require.NoError(t, err)
		requireKept(t, bob, rec, a, 1000)
		requireKept(t, bob, rec, b, 1000)
		require.Equal(t, record(4, middle, oldest), stateOf(t, rec), "the same record, as version 4")
	})
	t.Run("version 4 at the bound", func(t *testing.T) {
		raw := record(4, middle, oldest)
		rec, err := session.UnmarshalSession(raw)
		require.NoError(t, err)
		require.Equal(t, raw, stateOf(t, rec))
		requireKept(t, bob, rec, a, 1000)
	})
	refused := []struct {
		name string
		raw  []byte
	}{
		{"version 4 over the bound", record(4, newest, middle, oldest)},
		{"version 4 one key over the bound", record(4, single, middle, oldest)},
		{"version 4 without archived skipped keys", record(4, empty)},
		{"version 4 without archived state", record(4)},
	}
	for _, tt := range refused {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			require.ErrorIs(t, decodeErr(tt.raw), session.ErrMalformedState)
		})
	}
}

// TestWorstCaseRecordSize: a record with every bound reached (user ids
// of store.MaxUserIDLen bytes, MaxRejectedInitiations rejected and
// MaxRetiredInitiations retired base keys, MaxArchivedStates archived
// states, 8 previous ratchet keys in every state, MaxSkippedKeys skipped
// keys in the current state and MaxArchivedSkippedKeys in the archive)
// is the size computed in the doc of MaxArchivedSkippedKeys, however
// many messages the peer makes it skip: here MaxSkippedKeys in each of
// the last three states.
func TestWorstCaseRecordSize(t *testing.T) {
	long := func(c byte) string { return string(bytes.Repeat([]byte{c}, store.MaxUserIDLen)) }
	bob := newDevice(t, long('b'), 1, 0) // bob < zed: bob wins collisions
	zed := newDevice(t, long('z'), 1, 0)
	local := session.Local{Identity: bob.id, Address: bob.addr, Prekeys: bob.pk}
	recv := func(rec *session.Session, env session.Envelope) *session.Session {
		r, err := session.Receive(local, rec, env)
		require.NoError(t, err)
		return r.Session
	}
	rec, err := session.Initiate(rand.Reader, bob.id, bob.addr, zed.bundle())
	require.NoError(t, err)
	first := encrypt(t, rec, "hello")
	for range session.MaxRejectedInitiations {
		zs, err := session.Initiate(rand.Reader, zed.id, zed.addr, bob.bundle())
		require.NoError(t, err)
		rec = recv(rec, encrypt(t, zs, "collides"))
	}
	zs, _, err := session.Respond(zed.id, zed.addr, zed.pk, first)
	require.NoError(t, err)
	rec = recv(rec, encrypt(t, zs, "answer")) // bob's initiation is answered
	// fill gives the current state 8 previous ratchet keys and, if
	// skip, MaxSkippedKeys skipped keys.
	fill := func(rec, zs *session.Session, skip bool) *session.Session {
		for range 9 {
			rec = recv(rec, encrypt(t, zs, "ping"))
			decrypt(t, zs, encrypt(t, rec, "pong"), "pong")
		}
		for range session.MaxSkippedKeys / session.MaxSkip {
			if !skip {
				break
			}
			for range session.MaxSkip {
				_, err := zs.Encrypt([]byte("lost"))
				require.NoError(t, err)
			}
			rec = recv(rec, encrypt(t, zs, "arrives"))
		}
		return rec
	}
	restarts := session.MaxArchivedStates + session.MaxRetiredInitiations + 1
	for i := range restarts {
		zs, err = session.Initiate(rand.Reader, zed.id, zed.addr, bob.bundle())
		require.NoError(t, err)
		rec = recv(rec, encrypt(t, zs, "started over"))
		if left := restarts - i; left <= session.MaxArchivedStates+1 { // the states kept
			rec = fill(rec, zs, left <= 3)
		}
	}
	require.Equal(t, session.MaxArchivedStates, rec.ArchivedStates())
	rejected, retired := rec.RememberedInitiations()
	require.Equal(t, session.MaxRejectedInitiations, rejected)
	require.Equal(t, session.MaxRetiredInitiations, retired)
	current, archived := rec.SkippedKeys()
	require.Equal(t, session.MaxSkippedKeys, current)
	require.Equal(t, session.MaxArchivedSkippedKeys, archived)

	addrSize := 2 + store.MaxUserIDLen + 8
	state := 2*addrSize + 2*64 + 1 + 120 + 4 + 5*32 + 3*4 + 1 + 8*session.KeySize + 2
	want := 6 + state + session.MaxSkippedKeys*68 +
		1 + session.MaxArchivedStates*state + session.MaxArchivedSkippedKeys*68 +
		1 + session.MaxRejectedInitiations*session.KeySize +
		1 + session.MaxRetiredInitiations*session.KeySize
	require.Equal(t, 324_457, want, "the size in the doc of MaxArchivedSkippedKeys")
	require.Len(t, stateOf(t, roundTrip(t, rec)), want)
}

// TestSupersedeBoundsArchivedSkippedKeys: a session of this device's own
// that supersedes the record archives its current state under the same
// bound, the oldest state's oldest keys evicted first; prev is unchanged.
func TestSupersedeBoundsArchivedSkippedKeys(t *testing.T) {
	alice := newDevice(t, "alice", 1, 0)
	bob := newDevice(t, "bob", 1, 0)
	var rec *session.Session
	var states []*lossy
	for _, n := range []int{1000, 1000, 500} {
		var l *lossy
		rec, l = startWithLosses(t, alice, bob, rec, n)
		states = append(states, l)
	}
	before := stateOf(t, rec)
	own, err := session.Initiate(rand.Reader, bob.id, bob.addr, alice.bundle())
	require.NoError(t, err)
	require.NoError(t, own.Supersede(rec))
	require.Equal(t, before, stateOf(t, rec), "Supersede changes nothing of prev")
	own = roundTrip(t, own)
	require.Equal(t, 3, own.ArchivedStates())
	current, archived := own.SkippedKeys()
	require.Zero(t, current)
	require.Equal(t, session.MaxArchivedSkippedKeys, archived)
	for i, kept := range []int{500, 1000, 500} {
		requireKept(t, bob, own, states[i], kept)
	}
}
