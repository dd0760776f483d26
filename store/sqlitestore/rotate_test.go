package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/store/sqlitestore"

	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// rotateKey returns a deterministic key made of b repeated.
func rotateKey(t *testing.T, b byte) seal.Key {
	t.Helper()
	secret := make([]byte, seal.KeySize)
	for i := range secret {
		secret[i] = b
	}
	k, err := seal.NewKey(secret)
	require.NoError(t, err)
	return k
}

func rotateOpen(t *testing.T, path string, current seal.Key, older ...seal.Key) *sqlitestore.Store {
	t.Helper()
	kr, err := seal.NewKeyring(current, older...)
	require.NoError(t, err)
	s, err := sqlitestore.Open(context.Background(), path, kr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// rotateValue is one sealed value of the database: where it lives, how it
// opens, and the plaintext it must open to.
type rotateValue struct {
	rt        seal.RecordType
	ad        []byte
	plaintext []byte
}

// rotateFill writes rows into every table through the store API (pending
// inbound through its query, the store having no API for it) and returns
// every sealed value's expected plaintext, keyed by table and row.
func rotateFill(t *testing.T, s *sqlitestore.Store) map[string]rotateValue {
	t.Helper()
	ctx := context.Background()
	want := map[string]rotateValue{}

	me := store.DeviceAddress{UserID: "alice", DeviceID: 1}
	secret := []byte("alice/1 identity and prekeys")
	require.NoError(t, s.SaveLocalIdentity(ctx, store.LocalIdentity{Address: me, Secret: secret}))
	want["local_identity/"+me.String()] = rotateValue{seal.RecordLocalIdentity, seal.AddressAD(me.UserID, me.DeviceID), secret}

	peers := []store.DeviceAddress{{UserID: "bob", DeviceID: 1}, {UserID: "bob", DeviceID: 2}, {UserID: "carol", DeviceID: 3}, {UserID: "dave", DeviceID: 0}}
	for i, p := range peers {
		u := store.PeerState{Pin: []byte("pin of " + p.String())}
		if i != 2 {
			u.Session = []byte("session with " + p.String())
		}
		if i != 1 {
			u.Initiation = []byte("initiation to " + p.String())
		}
		require.NoError(t, s.SavePeer(ctx, p, u))
		want["identity_pin/"+p.String()] = rotateValue{seal.RecordIdentityPin, seal.AddressAD(p.UserID, p.DeviceID), u.Pin}
		if u.Session != nil {
			want["session/"+p.String()] = rotateValue{seal.RecordSession, seal.AddressAD(p.UserID, p.DeviceID), u.Session}
		}
		if u.Initiation != nil {
			want["session_initiation/"+p.String()] = rotateValue{seal.RecordSessionInitiation, seal.AddressAD(p.UserID, p.DeviceID), u.Initiation}
		}
	}

	var gone store.LogicalMessageID
	for i := range 9 {
		to := peers[i%3]
		id := store.NewLogicalMessageID()
		pt := fmt.Appendf(nil, "message %d for %s", i, to)
		seq, err := s.InsertPending(ctx, to, id, pt)
		require.NoError(t, err)
		if i == 8 {
			gone = id
			continue
		}
		want[fmt.Sprintf("pending_outbound_message/%d", seq)] = rotateValue{seal.RecordPendingOutbound, seal.MessageAD(to.UserID, to.DeviceID, id), pt}
	}
	ok, err := s.AbandonPending(ctx, peers[8%3], gone)
	require.NoError(t, err)
	require.True(t, ok)

	// Received messages: the session advances and the ids are processed.
	bobSession := []byte("session with bob/1, advanced")
	for i := range 2 {
		id := store.NewLogicalMessageID()
		pt := fmt.Appendf(nil, "received %d", i)
		got, err := s.CommitReceived(ctx, peers[0], id, pt, store.Inbound{Update: store.PeerState{Session: bobSession}})
		require.NoError(t, err)
		require.Equal(t, store.ReceivedNew, got.Status)
		want[fmt.Sprintf("pending_inbound_message/%d", got.Sequence)] = rotateValue{seal.RecordPendingInbound, seal.MessageAD(peers[0].UserID, peers[0].DeviceID, id), pt}
	}
	want["session/"+peers[0].String()] = rotateValue{seal.RecordSession, seal.AddressAD(peers[0].UserID, peers[0].DeviceID), bobSession}

	q := db.New(sqliteaccess.DB(s))
	for i := range 3 {
		from := peers[i%2]
		id := store.NewLogicalMessageID()
		pt := fmt.Appendf(nil, "inbound %d from %s", i, from)
		sealed, err := sqliteaccess.Keyring(s).Seal(seal.RecordPendingInbound, seal.MessageAD(from.UserID, from.DeviceID, id), pt)
		require.NoError(t, err)
		seq, err := q.InsertPendingInbound(ctx, db.InsertPendingInboundParams{SenderUserID: from.UserID, SenderDeviceID: from.DeviceID, LogicalID: id[:], Sealed: sealed})
		require.NoError(t, err)
		want[fmt.Sprintf("pending_inbound_message/%d", seq)] = rotateValue{seal.RecordPendingInbound, seal.MessageAD(from.UserID, from.DeviceID, id), pt}
	}
	return want
}

// rotateSealed reads every sealed value of every table except storage_key,
// keyed like rotateFill's result, through the rotation batch queries.
func rotateSealed(t *testing.T, s *sqlitestore.Store) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	q := db.New(sqliteaccess.DB(s))
	got := map[string][]byte{}
	li, err := q.GetLocalIdentity(ctx)
	require.NoError(t, err)
	got["local_identity/"+store.DeviceAddress{UserID: li.UserID.(string), DeviceID: li.DeviceID.(int64)}.String()] = li.Sealed.([]byte)
	const all = 1 << 20
	pins, err := q.SealedIdentityPinBatch(ctx, db.SealedIdentityPinBatchParams{AfterDeviceID: -1, RowLimit: all})
	require.NoError(t, err)
	for _, r := range pins {
		got["identity_pin/"+store.DeviceAddress{UserID: r.UserID, DeviceID: r.DeviceID}.String()] = r.Sealed
	}
	sessions, err := q.SealedSessionBatch(ctx, db.SealedSessionBatchParams{AfterDeviceID: -1, RowLimit: all})
	require.NoError(t, err)
	for _, r := range sessions {
		got["session/"+store.DeviceAddress{UserID: r.UserID, DeviceID: r.DeviceID}.String()] = r.Sealed
	}
	inits, err := q.SealedSessionInitiationBatch(ctx, db.SealedSessionInitiationBatchParams{AfterDeviceID: -1, RowLimit: all})
	require.NoError(t, err)
	for _, r := range inits {
		got["session_initiation/"+store.DeviceAddress{UserID: r.UserID, DeviceID: r.DeviceID}.String()] = r.Sealed
	}
	out, err := q.SealedPendingOutboundBatch(ctx, db.SealedPendingOutboundBatchParams{SealedLimit: storeimpl.MaxSealedMessageSize, RowLimit: all})
	require.NoError(t, err)
	for _, r := range out {
		v, ok := r.Sealed.([]byte)
		require.True(t, ok, "pending outbound %d: sealed is %T", r.Sequence, r.Sealed)
		got[fmt.Sprintf("pending_outbound_message/%d", r.Sequence)] = v
	}
	in, err := q.SealedPendingInboundBatch(ctx, db.SealedPendingInboundBatchParams{RowLimit: all})
	require.NoError(t, err)
	for _, r := range in {
		got[fmt.Sprintf("pending_inbound_message/%d", r.Sequence)] = r.Sealed
	}
	return got
}

// rotateKeyIDs counts the sealed values (verifiers included) per key id.
func rotateKeyIDs(t *testing.T, s *sqlitestore.Store) map[seal.KeyID]int {
	t.Helper()
	n := map[seal.KeyID]int{}
	for name, v := range rotateSealed(t, s) {
		h, err := seal.Parse(v)
		require.NoError(t, err, name)
		n[h.KeyID]++
	}
	keys, err := db.New(sqliteaccess.DB(s)).ListStorageKeys(context.Background())
	require.NoError(t, err)
	for _, k := range keys {
		h, err := seal.Parse(k.Verifier)
		require.NoError(t, err)
		n[h.KeyID]++
	}
	return n
}

// rotateCheck asserts that every sealed value is under key and opens with
// a keyring of only key to its expected plaintext, that the rows are
// exactly the expected ones, and that storage_key holds key alone.
func rotateCheck(t *testing.T, s *sqlitestore.Store, key seal.Key, want map[string]rotateValue) {
	t.Helper()
	only, err := seal.NewKeyring(key)
	require.NoError(t, err)
	got := rotateSealed(t, s)
	require.Len(t, got, len(want))
	for name, w := range want {
		v, ok := got[name]
		require.True(t, ok, "row %s is gone", name)
		h, err := seal.Parse(v)
		require.NoError(t, err, name)
		assert.Equal(t, key.ID(), h.KeyID, "%s key id", name)
		pt, err := only.Open(w.rt, w.ad, v)
		require.NoError(t, err, name)
		assert.Equal(t, w.plaintext, pt, name)
	}
	keys, err := db.New(sqliteaccess.DB(s)).ListStorageKeys(context.Background())
	require.NoError(t, err)
	require.Len(t, keys, 1)
	assert.Equal(t, int64(key.ID()), keys[0].KeyID)
	assert.Equal(t, "active", keys[0].State)
	h, err := seal.Parse(keys[0].Verifier)
	require.NoError(t, err)
	assert.Equal(t, key.ID(), h.KeyID)
	assert.Equal(t, []seal.KeyID{key.ID()}, sqliteaccess.Keyring(s).KeyIDs(), "every other key is forgotten")
}

// rotatePending returns every pending message's sequence, in cursor order.
func rotatePending(t *testing.T, s *sqlitestore.Store) []int64 {
	t.Helper()
	var seqs []int64
	req := store.PageRequest{Limit: 3}
	for {
		p, err := s.PendingMessages(context.Background(), req)
		require.NoError(t, err)
		for _, m := range p.Messages {
			seqs = append(seqs, m.Sequence)
		}
		if p.NextAfterSequence == nil {
			return seqs
		}
		req.After = p.NextAfterSequence
	}
}

func TestRotateKey(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "client.db")
	oldKey, newKey := rotateKey(t, 0x11), rotateKey(t, 0x22)
	s := rotateOpen(t, path, oldKey)
	want := rotateFill(t, s)
	seqs := rotatePending(t, s)
	hw, err := sqliteaccess.SequenceHighWater(ctx, s)
	require.NoError(t, err)
	require.Greater(t, hw, seqs[len(seqs)-1], "the fill leaves a gap at the top")

	var reports []store.RotationProgress
	require.NoError(t, s.RotateKey(ctx, newKey, 2, func(p store.RotationProgress) { reports = append(reports, p) }))

	rotateCheck(t, s, newKey, want)
	assert.Equal(t, seqs, rotatePending(t, s), "sequences unchanged")
	hw2, err := sqliteaccess.SequenceHighWater(ctx, s)
	require.NoError(t, err)
	assert.Equal(t, hw, hw2, "high-water mark unchanged")
	assert.NotContains(t, sqliteaccess.Keyring(s).KeyIDs(), oldKey.ID())
	assert.Equal(t, newKey.ID(), sqliteaccess.Keyring(s).Current())

	// Progress: one report over the whole rotation, every table walked in
	// batches of at most 2, the first pass re-sealing everything and the
	// second confirming, Total twice the rows counted at the start.
	requireProgress(t, reports, true)
	walked := rotationWalk(reports)
	require.Len(t, walked, 2, "one re-sealing pass and one confirming pass")
	tables := []string{"local_identity", "identity_pin", "session", "session_initiation", "pending_outbound_message", "pending_inbound_message", "storage_key"}
	rows := int64(0)
	for _, table := range tables {
		p1, p2 := walked[1][table], walked[2][table]
		assert.Positive(t, p1.rows, table)
		assert.Equal(t, p1.rows, p2.rows, "%s: both passes walk every row", table)
		assert.LessOrEqual(t, p1.largest, int64(2), "%s: batch size", table)
		if table == "storage_key" {
			assert.Equal(t, int64(1), p1.resealed, "only the old key's verifier was under the old key")
		} else {
			assert.Equal(t, p1.rows, p1.resealed, "%s: everything was under the old key", table)
		}
		assert.Zero(t, p2.resealed, "%s: the confirming pass re-seals nothing", table)
		rows += p1.rows
	}
	assert.Equal(t, int64(len(seqs)), walked[1]["pending_outbound_message"].rows)
	assert.Equal(t, int64(2), walked[1]["storage_key"].rows, "old and new key during the walk")
	assert.Equal(t, 2*rows, reports[0].Total, "Total is known from the first report")

	// The store still reads everything through its API.
	li, err := s.LocalIdentity(ctx)
	require.NoError(t, err)
	assert.Equal(t, []byte("alice/1 identity and prekeys"), li.Secret)

	// Reopen: the new key alone works, the old key alone is refused.
	require.NoError(t, s.Close())
	s2 := rotateOpen(t, path, newKey)
	rotateCheck(t, s2, newKey, want)
	assert.Equal(t, seqs, rotatePending(t, s2))
	require.NoError(t, s2.Close())

	kr, err := seal.NewKeyring(oldKey)
	require.NoError(t, err)
	_, err = sqlitestore.Open(ctx, path, kr)
	require.ErrorIs(t, err, seal.ErrWrongKey)

	// Rotating to the key already in use is a no-op that changes nothing.
	s3 := rotateOpen(t, path, newKey)
	before := rotateSealed(t, s3)
	require.NoError(t, s3.RotateKey(ctx, newKey, 2, nil))
	assert.Equal(t, before, rotateSealed(t, s3))
	rotateCheck(t, s3, newKey, want)
}

func TestRotateKeyInterruptedThenResumed(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "client.db")
	oldKey, newKey := rotateKey(t, 0x11), rotateKey(t, 0x22)
	s := rotateOpen(t, path, oldKey)
	want := rotateFill(t, s)
	seqs := rotatePending(t, s)

	// Cancel from the progress callback after the first batch.
	cctx, cancel := context.WithCancel(ctx)
	calls := 0
	err := s.RotateKey(cctx, newKey, 2, func(store.RotationProgress) {
		calls++
		cancel()
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, calls)

	// Half done: the first batch is under the new key, the rest under the
	// old one; both keys are recorded and held.
	counts := rotateKeyIDs(t, s)
	assert.Positive(t, counts[newKey.ID()])
	assert.Positive(t, counts[oldKey.ID()])
	keys, err := db.New(sqliteaccess.DB(s)).ListStorageKeys(ctx)
	require.NoError(t, err)
	states := map[int64]string{}
	for _, k := range keys {
		states[k.KeyID] = k.State
	}
	assert.Equal(t, map[int64]string{int64(newKey.ID()): "active", int64(oldKey.ID()): "retiring"}, states)
	assert.Contains(t, sqliteaccess.Keyring(s).KeyIDs(), oldKey.ID())
	assert.Equal(t, newKey.ID(), sqliteaccess.Keyring(s).Current())

	// The store still works mid-rotation: new writes seal with the new key.
	_, err = s.LocalIdentity(ctx)
	require.NoError(t, err)
	assert.Equal(t, seqs, rotatePending(t, s))

	// Calling RotateKey again finishes the job, skipping what was done.
	var reports []store.RotationProgress
	require.NoError(t, s.RotateKey(ctx, newKey, 2, func(p store.RotationProgress) { reports = append(reports, p) }))
	rotateCheck(t, s, newKey, want)
	assert.Equal(t, seqs, rotatePending(t, s))
	require.NotEmpty(t, reports)
	assert.Equal(t, "local_identity", reports[0].Table)
	assert.Zero(t, reports[0].Resealed, "the first batch was done before the interruption")
}

func TestRotateKeyResumedAfterRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "client.db")
	oldKey, newKey := rotateKey(t, 0x11), rotateKey(t, 0x22)
	s := rotateOpen(t, path, oldKey)
	want := rotateFill(t, s)
	seqs := rotatePending(t, s)

	// Interrupt in the middle of pending_outbound_message.
	cctx, cancel := context.WithCancel(ctx)
	err := s.RotateKey(cctx, newKey, 2, func(p store.RotationProgress) {
		if p.Table == "pending_outbound_message" {
			cancel()
		}
	})
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, s.Close())

	// The new key is the active one now: the old key alone is refused.
	kr, err := seal.NewKeyring(oldKey)
	require.NoError(t, err)
	_, err = sqlitestore.Open(ctx, path, kr)
	require.ErrorIs(t, err, seal.ErrWrongKey)

	// After a restart, with both keys, the rotation finishes.
	s2 := rotateOpen(t, path, newKey, oldKey)
	require.NoError(t, s2.RotateKey(ctx, newKey, 2, nil))
	rotateCheck(t, s2, newKey, want)
	assert.Equal(t, seqs, rotatePending(t, s2))
}

// rotateDamage is one damaged row for TestRotateKeySkipsDamagedRows.
type rotateDamage struct {
	name string // the row's key in rotateSealed's result
	want store.SkippedRow
	// remove deletes the row through the store, as the application would
	// once told about it.
	remove func(t *testing.T, s *sqlitestore.Store, r store.SkippedRow)
}

// TestRotateKeySkipsDamagedRows: a row that does not open, or holds a
// column of the wrong storage class, never stops a rotation. Every other
// row ends under the new key, the damaged row stays byte for byte, the
// *RotationError lists exactly it, the old key is kept only if the row's
// header names it, running RotateKey again changes nothing and reports
// the same, and once the row is removed a last run drops the old key.
func TestRotateKeySkipsDamagedRows(t *testing.T) {
	oldKey, newKey, strayKey := rotateKey(t, 0x11), rotateKey(t, 0x22), rotateKey(t, 0x33)
	bob := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	// firstPending returns the first pending outbound row (it opens).
	firstPending := func(t *testing.T, s *sqlitestore.Store) store.PendingMessage {
		t.Helper()
		p, err := s.PendingMessages(context.Background(), store.PageRequest{Limit: 1})
		require.NoError(t, err)
		require.Len(t, p.Messages, 1)
		return p.Messages[0]
	}
	flipLast := func(t *testing.T, s *sqlitestore.Store, query string, args ...any) {
		t.Helper()
		var v []byte
		require.NoError(t, sqliteaccess.DB(s).QueryRowContext(context.Background(), "SELECT sealed FROM "+query, args...).Scan(&v))
		v[len(v)-1] ^= 0x01 // in the tag: the header still names the old key
		_, err := sqliteaccess.DB(s).ExecContext(context.Background(), "UPDATE "+strings.Replace(query, "WHERE", "SET sealed = ? WHERE", 1), append([]any{v}, args...)...)
		require.NoError(t, err)
	}
	deleteSequence := func(t *testing.T, s *sqlitestore.Store, r store.SkippedRow) {
		u, ok := r.Pending()
		require.True(t, ok)
		gone, err := s.AbandonPendingMessage(context.Background(), u.PendingMessage)
		require.NoError(t, err)
		require.True(t, gone)
	}

	tests := []struct {
		name   string
		damage func(t *testing.T, s *sqlitestore.Store, want map[string]rotateValue) rotateDamage
		cause  error
		// again is the cause on the next run, if not cause: the key of an
		// altered row was dropped, so it is now under a key not held.
		again error
		kept  []seal.KeyID
	}{
		{
			name: "pending row altered",
			damage: func(t *testing.T, s *sqlitestore.Store, want map[string]rotateValue) rotateDamage {
				m := firstPending(t, s)
				flipLast(t, s, "pending_outbound_message WHERE sequence = ?", m.Sequence)
				name := fmt.Sprintf("pending_outbound_message/%d", m.Sequence)
				delete(want, name)
				return rotateDamage{name: name, remove: deleteSequence, want: store.SkippedRow{
					Table: "pending_outbound_message", Address: m.Recipient, Sequence: m.Sequence, ID: m.ID,
					SealedWith: oldKey.ID(), HasHeader: true,
				}}
			},
			cause: seal.ErrAuthentication,
			again: seal.ErrWrongKey,
			kept:  []seal.KeyID{}, // tried with every key and failed: dropping keys cannot make it worse
		},
		{
			name: "session row altered",
			damage: func(t *testing.T, s *sqlitestore.Store, want map[string]rotateValue) rotateDamage {
				flipLast(t, s, "session WHERE user_id = ? AND device_id = ?", bob.UserID, bob.DeviceID)
				name := "session/" + bob.String()
				delete(want, name)
				return rotateDamage{
					name: name, want: store.SkippedRow{Table: "session", Address: bob, SealedWith: oldKey.ID(), HasHeader: true},
					remove: func(t *testing.T, s *sqlitestore.Store, r store.SkippedRow) {
						require.NoError(t, s.SavePeer(context.Background(), r.Address, store.PeerState{Session: []byte{}}))
					},
				}
			},
			cause: seal.ErrAuthentication,
			again: seal.ErrWrongKey,
			kept:  []seal.KeyID{},
		},
		{
			name: "pending row with a BLOB recipient",
			damage: func(t *testing.T, s *sqlitestore.Store, want map[string]rotateValue) rotateDamage {
				m := firstPending(t, s)
				_, err := sqliteaccess.DB(s).ExecContext(context.Background(),
					"UPDATE pending_outbound_message SET recipient_user_id = CAST(recipient_user_id AS BLOB) WHERE sequence = ?", m.Sequence)
				require.NoError(t, err)
				name := fmt.Sprintf("pending_outbound_message/%d", m.Sequence)
				delete(want, name)
				return rotateDamage{
					name: name, want: store.SkippedRow{
						Table: "pending_outbound_message", Address: m.Recipient, Sequence: m.Sequence, ID: m.ID,
						SealedWith: oldKey.ID(), HasHeader: true, Authentic: true,
					},
					// Abandoned by recipient and id, as a page reports it.
					remove: func(t *testing.T, s *sqlitestore.Store, r store.SkippedRow) {
						u, ok := r.Pending()
						require.True(t, ok)
						gone, err := s.AbandonPending(context.Background(), u.Recipient, u.ID)
						require.NoError(t, err)
						require.True(t, gone)
					},
				}
			},
			cause: store.ErrCorruptRow,
			kept:  []seal.KeyID{oldKey.ID()}, // authentic, not re-sealed: it opens once repaired
		},
		{
			name: "session row with a BLOB user id",
			damage: func(t *testing.T, s *sqlitestore.Store, want map[string]rotateValue) rotateDamage {
				ctx := context.Background()
				_, err := sqliteaccess.DB(s).ExecContext(ctx, "UPDATE session SET user_id = CAST(user_id AS BLOB) WHERE user_id = ? AND device_id = ?", bob.UserID, bob.DeviceID)
				require.NoError(t, err)
				name := "session/" + bob.String()
				delete(want, name)
				return rotateDamage{
					name: name, want: store.SkippedRow{Table: "session", Address: bob, SealedWith: oldKey.ID(), HasHeader: true, Authentic: true},
					// The store never finds a row of another class under
					// its peer (lookups bind TEXT): removed by hand.
					remove: func(t *testing.T, s *sqlitestore.Store, r store.SkippedRow) {
						_, err := sqliteaccess.DB(s).ExecContext(context.Background(), "DELETE FROM session WHERE user_id = CAST(? AS BLOB) AND device_id = ?", r.Address.UserID, r.Address.DeviceID)
						require.NoError(t, err)
					},
				}
			},
			cause: store.ErrCorruptRow,
			kept:  []seal.KeyID{oldKey.ID()},
		},
		{
			name: "pending row under a key the keyring does not hold",
			damage: func(t *testing.T, s *sqlitestore.Store, want map[string]rotateValue) rotateDamage {
				stray, err := seal.NewKeyring(strayKey)
				require.NoError(t, err)
				to, id := store.DeviceAddress{UserID: "erin", DeviceID: 5}, store.NewLogicalMessageID()
				v, err := stray.Seal(seal.RecordPendingOutbound, seal.MessageAD(to.UserID, to.DeviceID, id), []byte("stray"))
				require.NoError(t, err)
				seq, err := db.New(sqliteaccess.DB(s)).InsertPendingOutbound(context.Background(), db.InsertPendingOutboundParams{
					RecipientUserID: to.UserID, RecipientDeviceID: to.DeviceID, LogicalID: id[:], Sealed: v,
				})
				require.NoError(t, err)
				return rotateDamage{
					name: fmt.Sprintf("pending_outbound_message/%d", seq), remove: deleteSequence,
					want: store.SkippedRow{
						Table: "pending_outbound_message", Address: to, Sequence: seq, ID: id,
						SealedWith: strayKey.ID(), HasHeader: true,
					},
				}
			},
			cause: seal.ErrWrongKey,
			kept:  []seal.KeyID{}, // no key can open it: the old key goes
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := rotateOpen(t, filepath.Join(t.TempDir(), "client.db"), oldKey)
			want := rotateFill(t, s)
			d := tc.damage(t, s, want)
			damaged := rotateSealed(t, s)[d.name]
			require.NotNil(t, damaged)
			pending := rotatePending(t, s)

			// requireReport checks that err reports exactly the damaged row.
			requireReport := func(t *testing.T, err, cause error) {
				t.Helper()
				require.ErrorIs(t, err, store.ErrRowsSkipped)
				require.ErrorIs(t, err, cause)
				var re *store.RotationError
				require.ErrorAs(t, err, &re)
				require.Len(t, re.Skipped, 1)
				got := re.Skipped[0]
				require.ErrorIs(t, got.Cause, cause)
				got.Cause = nil
				assert.Equal(t, d.want, got)
				assert.Equal(t, tc.kept, re.Kept)
			}
			// requireRest checks every other row: under the new key, opening
			// with it alone, and the damaged row unchanged.
			requireRest := func(t *testing.T) {
				t.Helper()
				only, err := seal.NewKeyring(newKey)
				require.NoError(t, err)
				got := rotateSealed(t, s)
				require.Len(t, got, len(want)+1)
				assert.Equal(t, damaged, got[d.name], "the damaged row is byte-identical")
				for name, w := range want {
					pt, err := only.Open(w.rt, w.ad, got[name])
					require.NoError(t, err, name)
					assert.Equal(t, w.plaintext, pt, name)
				}
				assert.Equal(t, newKey.ID(), sqliteaccess.Keyring(s).Current())
				held := append([]seal.KeyID{newKey.ID()}, tc.kept...)
				slices.Sort(held)
				assert.Equal(t, held, sqliteaccess.Keyring(s).KeyIDs(), "only the kept old keys stay held")
				keys, err := db.New(sqliteaccess.DB(s)).ListStorageKeys(ctx)
				require.NoError(t, err)
				states := map[int64]string{}
				for _, k := range keys {
					states[k.KeyID] = k.State
				}
				wantStates := map[int64]string{int64(newKey.ID()): "active"}
				for _, k := range tc.kept {
					wantStates[int64(k)] = "retiring"
				}
				assert.Equal(t, wantStates, states)
			}

			var reports []store.RotationProgress
			err := s.RotateKey(ctx, newKey, 2, func(p store.RotationProgress) { reports = append(reports, p) })
			requireReport(t, err, tc.cause)
			requireRest(t)
			assert.Equal(t, pending, rotatePending(t, s), "the readable pending rows are unchanged")

			// Progress counts the skipped row in Done and Skipped, in each
			// pass, and in its table only.
			requireProgress(t, reports, true)
			table, _, _ := strings.Cut(d.name, "/")
			walked := rotationWalk(reports)
			require.Len(t, walked, 2)
			for pass, tables := range walked {
				for name, w := range tables {
					if name == table {
						assert.Equal(t, int64(1), w.skipped, "pass %d %s", pass, name)
					} else {
						assert.Zero(t, w.skipped, "pass %d %s", pass, name)
					}
					assert.LessOrEqual(t, w.resealed+w.skipped, w.rows)
				}
			}
			assert.Equal(t, int64(2), reports[len(reports)-1].Skipped, "one row, skipped by both passes")

			// Again: nothing is written, the same row is reported.
			before := rotateSealed(t, s)
			keysBefore, err := db.New(sqliteaccess.DB(s)).ListStorageKeys(ctx)
			require.NoError(t, err)
			again := s.RotateKey(ctx, newKey, 2, nil)
			if tc.again != nil {
				requireReport(t, again, tc.again)
			} else {
				requireReport(t, again, tc.cause)
			}
			assert.Equal(t, before, rotateSealed(t, s))
			keysAfter, err := db.New(sqliteaccess.DB(s)).ListStorageKeys(ctx)
			require.NoError(t, err)
			assert.Equal(t, keysBefore, keysAfter)
			requireRest(t)

			// The application removes the row as reported; a last run
			// finishes cleanly and drops the old key.
			var re *store.RotationError
			require.ErrorAs(t, again, &re)
			d.remove(t, s, re.Skipped[0])
			require.NoError(t, s.RotateKey(ctx, newKey, 2, nil))
			rotateCheck(t, s, newKey, want)
		})
	}
}

// TestRotateKeySkipsDamagedRowsResumed: a rotation over a damaged row,
// interrupted in the pending table and resumed after a restart with both
// keys, finishes and reports the row exactly once.
func TestRotateKeySkipsDamagedRowsResumed(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "client.db")
	oldKey, newKey := rotateKey(t, 0x11), rotateKey(t, 0x22)
	s := rotateOpen(t, path, oldKey)
	want := rotateFill(t, s)
	p, err := s.PendingMessages(ctx, store.PageRequest{Limit: store.MaxPageSize})
	require.NoError(t, err)
	m := p.Messages[len(p.Messages)-1] // walked after the interruption
	_, err = sqliteaccess.DB(s).ExecContext(ctx, "UPDATE pending_outbound_message SET recipient_device_id = recipient_device_id + 1 WHERE sequence = ?", m.Sequence)
	require.NoError(t, err)
	name := fmt.Sprintf("pending_outbound_message/%d", m.Sequence)
	delete(want, name)
	damaged := rotateSealed(t, s)[name]

	cctx, cancel := context.WithCancel(ctx)
	err = s.RotateKey(cctx, newKey, 2, func(p store.RotationProgress) {
		if p.Table == "pending_outbound_message" {
			cancel()
		}
	})
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, store.ErrRowsSkipped)
	require.NoError(t, s.Close())

	s2 := rotateOpen(t, path, newKey, oldKey)
	err = s2.RotateKey(ctx, newKey, 2, nil)
	var re *store.RotationError
	require.ErrorAs(t, err, &re)
	require.ErrorIs(t, err, seal.ErrAuthentication, "moved to another device: its associated data no longer matches")
	require.Len(t, re.Skipped, 1)
	moved := m.Recipient
	moved.DeviceID++
	assert.Equal(t, moved, re.Skipped[0].Address, "reported as stored")
	assert.Equal(t, m.Sequence, re.Skipped[0].Sequence)
	assert.Empty(t, re.Kept)
	assert.Equal(t, damaged, rotateSealed(t, s2)[name])

	u, _ := re.Skipped[0].Pending()
	gone, err := s2.AbandonPendingMessage(ctx, u.PendingMessage)
	require.NoError(t, err)
	require.True(t, gone)
	require.NoError(t, s2.RotateKey(ctx, newKey, 2, nil))
	rotateCheck(t, s2, newKey, want)
}

func TestRotateKeyInvalidArguments(t *testing.T) {
	s := rotateOpen(t, filepath.Join(t.TempDir(), "client.db"), rotateKey(t, 0x11))
	err := s.RotateKey(context.Background(), rotateKey(t, 0x22), -1, nil)
	assert.ErrorIs(t, err, store.ErrInvalidArgument)
	err = s.RotateKey(context.Background(), seal.Key{}, 2, nil)
	assert.ErrorIs(t, err, store.ErrInvalidArgument)
	assert.False(t, errors.Is(err, seal.ErrWrongKey))
	assert.Equal(t, 1, len(sqliteaccess.Keyring(s).KeyIDs()), "nothing was added")
}

// TestRotateKeyWithConcurrentWrites rotates while other goroutines keep
// inserting pending messages and saving peer state: afterwards every value
// opens with the new key alone, so no write sealed with the old key landed
// behind the walk.
func TestRotateKeyWithConcurrentWrites(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "client.db")
	oldKey, newKey := rotateKey(t, 0x33), rotateKey(t, 0x44)
	s := rotateOpen(t, path, oldKey)
	for i := range 50 {
		_, err := s.InsertPending(ctx, store.DeviceAddress{UserID: "bob", DeviceID: 1}, rotateID(i), []byte("before"))
		require.NoError(t, err)
	}

	// A bounded number of writes each, so that the walk (which also walks
	// the rows written meanwhile) ends.
	errs := make(chan error, 4)
	for w := range 4 {
		go func() {
			peer := store.DeviceAddress{UserID: fmt.Sprintf("writer-%d", w), DeviceID: 1}
			for i := range 100 {
				if _, err := s.InsertPending(ctx, peer, rotateID(i), []byte("during")); err != nil {
					errs <- err
					return
				}
				if err := s.SavePeer(ctx, peer, store.PeerState{Session: []byte(fmt.Sprint("session ", i))}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	var reports []store.RotationProgress
	rotated := s.RotateKey(ctx, newKey, 5, func(p store.RotationProgress) { reports = append(reports, p) })
	for range 4 {
		require.NoError(t, <-errs)
	}
	require.NoError(t, rotated)
	requireProgress(t, reports, false)
	require.NoError(t, s.Close())

	s2 := rotateOpen(t, path, newKey)
	n := 0
	var after int64
	for {
		page, err := s2.PendingMessages(ctx, store.PageRequest{After: &after, Limit: store.MaxPageSize})
		require.NoError(t, err, "every pending message opens with the new key alone")
		n += len(page.Messages)
		if page.NextAfterSequence == nil {
			break
		}
		after = *page.NextAfterSequence
	}
	count, err := s2.PendingMessageCount(ctx, nil)
	require.NoError(t, err)
	require.EqualValues(t, count, n)
	for w := range 4 {
		_, err := s2.Peer(ctx, store.DeviceAddress{UserID: fmt.Sprintf("writer-%d", w), DeviceID: 1})
		require.NoError(t, err, "every session opens with the new key alone")
	}
}

// rotateID returns a logical id made from i.
func rotateID(i int) store.LogicalMessageID {
	var id store.LogicalMessageID
	copy(id[:], fmt.Sprintf("rotate-%09d", i))
	return id
}

// TestRotateKeyRowsAtOrBelowZero: rows a damaged database holds at
// sequence 0 or below (the smallest int64 included) are re-sealed like the
// others, so that they still open once the old key is forgotten.
func TestRotateKeyRowsAtOrBelowZero(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "client.db")
	oldKey, newKey := rotateKey(t, 0x11), rotateKey(t, 0x22)
	s := rotateOpen(t, path, oldKey)
	to := store.DeviceAddress{UserID: "bob", DeviceID: 2}
	moved := map[int]int64{0: 0, 1: -5, 2: math.MinInt64}
	for i := range 4 {
		seq, err := s.InsertPending(ctx, to, rotateID(i), []byte(fmt.Sprintf("message %d", i)))
		require.NoError(t, err)
		if target, ok := moved[i]; ok {
			_, err := sqliteaccess.DB(s).ExecContext(ctx, "UPDATE pending_outbound_message SET sequence = ? WHERE sequence = ?", target, seq)
			require.NoError(t, err)
		}
	}
	require.NoError(t, s.RotateKey(ctx, newKey, 2, nil))
	require.NoError(t, s.Close())

	s2 := rotateOpen(t, path, newKey)
	p, err := s2.PendingMessages(ctx, store.PageRequest{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, p.Unreadable, "every row was re-sealed under the new key")
	require.Len(t, p.Messages, 4)
	require.Equal(t, []int64{math.MinInt64, -5, 0}, []int64{p.Messages[0].Sequence, p.Messages[1].Sequence, p.Messages[2].Sequence})
	for _, m := range p.Messages {
		i := int(m.ID[len(m.ID)-1] - '0') // rotateID(i) ends in the digit i
		require.Equal(t, fmt.Sprintf("message %d", i), string(m.Plaintext))
	}
}

// TestRotationErrorMessageIsBounded: every skipped row is in Skipped and
// matched by errors.Is, but the message names only the first ones.
func TestRotationErrorMessageIsBounded(t *testing.T) {
	for _, n := range []int{1, 10, 25} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			e := &store.RotationError{}
			for i := range n {
				e.Skipped = append(e.Skipped, store.SkippedRow{Table: "pending_outbound_message", Sequence: int64(i + 1), Cause: seal.ErrAuthentication})
			}
			msg := e.Error()
			require.Contains(t, msg, fmt.Sprintf("%d skipped", n))
			require.Equal(t, min(n, 10), strings.Count(msg, "; pending_outbound_message sequence"))
			if n > 10 {
				require.Contains(t, msg, fmt.Sprintf("and %d more", n-10))
			} else {
				require.NotContains(t, msg, "more")
			}
			require.ErrorIs(t, e, store.ErrRowsSkipped)
			require.ErrorIs(t, e, seal.ErrAuthentication)
		})
	}
}

// TestRotateKeySkipsCorruptLocalIdentity: a local_identity row with a
// column of another storage class than the schema declares is reported
// and left as it was, like a corrupt row of any other table; its key is
// kept only if its value authenticates as the row its columns spell; it
// does not stop the rotation of the other tables. Once it is repaired a
// last run re-seals it and drops the old key.
func TestRotateKeySkipsCorruptLocalIdentity(t *testing.T) {
	oldKey, newKey := rotateKey(t, 0x11), rotateKey(t, 0x22)
	me := store.DeviceAddress{UserID: "alice", DeviceID: 1} // rotateFill's
	tests := []struct {
		name   string
		damage string
		args   []any
		// reported is the address the skipped row names, as far as it
		// decodes.
		reported store.DeviceAddress
		// authentic: the value authenticates as the row the columns
		// spell, so its key is kept; otherwise the key is dropped and the
		// repaired row stays under a key the keyring no longer holds.
		authentic bool
	}{
		{"TEXT device id", "UPDATE local_identity SET device_id = ?", []any{"one"}, store.DeviceAddress{UserID: me.UserID}, false},
		{"REAL device id", "UPDATE local_identity SET device_id = ?", []any{1.5}, store.DeviceAddress{UserID: me.UserID}, false},
		{"BLOB user id", "UPDATE local_identity SET user_id = CAST(user_id AS BLOB)", nil, me, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := rotateOpen(t, filepath.Join(t.TempDir(), "client.db"), oldKey)
			want := rotateFill(t, s)
			var before []byte
			require.NoError(t, sqliteaccess.DB(s).QueryRowContext(ctx, "SELECT sealed FROM local_identity").Scan(&before))
			_, err := sqliteaccess.DB(s).ExecContext(ctx, tc.damage, tc.args...)
			require.NoError(t, err)

			re := oneCorruptRowSkipped(t, s.RotateKey(ctx, newKey, 2, nil))
			got := re.Skipped[0]
			got.Cause = nil
			assert.Equal(t, store.SkippedRow{Table: "local_identity", Address: tc.reported, SealedWith: oldKey.ID(), HasHeader: true, Authentic: tc.authentic}, got)
			if !tc.authentic {
				assert.Empty(t, re.Kept, "a header that does not authenticate keeps no key")
				assert.Equal(t, []seal.KeyID{newKey.ID()}, sqliteaccess.Keyring(s).KeyIDs())
				return
			}
			assert.Equal(t, []seal.KeyID{oldKey.ID()}, re.Kept, "authentic: its key stays")

			// Repaired by hand: the row is byte-identical, every other row
			// is under the new key alone.
			_, err = sqliteaccess.DB(s).ExecContext(ctx, "UPDATE local_identity SET user_id = ?, device_id = ?", me.UserID, me.DeviceID)
			require.NoError(t, err)
			only, err := seal.NewKeyring(newKey)
			require.NoError(t, err)
			sealed := rotateSealed(t, s)
			require.Len(t, sealed, len(want))
			for name, w := range want {
				if strings.HasPrefix(name, "local_identity/") {
					assert.Equal(t, before, sealed[name], "the corrupt row is left as it was")
					continue
				}
				pt, err := only.Open(w.rt, w.ad, sealed[name])
				require.NoError(t, err, name)
				assert.Equal(t, w.plaintext, pt, name)
			}

			require.NoError(t, s.RotateKey(ctx, newKey, 2, nil))
			rotateCheck(t, s, newKey, want)
		})
	}
}

// requireProgress checks what a progress bar relies on: Done, Resealed
// and Skipped never decrease, Done never passes Total, the fraction
// Done/Total never goes back, and the last report has Done == Total. If
// exact (nothing was written during the rotation), Total never changes
// and no report before the last has Done == Total.
func requireProgress(t *testing.T, reports []store.RotationProgress, exact bool) {
	t.Helper()
	require.NotEmpty(t, reports)
	var prev store.RotationProgress
	for i, p := range reports {
		require.LessOrEqual(t, p.Done, p.Total, "report %d", i)
		require.GreaterOrEqual(t, p.Done, prev.Done, "report %d: Done never decreases", i)
		require.GreaterOrEqual(t, p.Resealed, prev.Resealed, "report %d", i)
		require.GreaterOrEqual(t, p.Skipped, prev.Skipped, "report %d", i)
		if i > 0 {
			require.GreaterOrEqual(t, p.Done*prev.Total, prev.Done*p.Total, "report %d: the fraction never goes back", i)
		}
		if exact {
			require.Equal(t, reports[0].Total, p.Total, "report %d: Total as counted", i)
			if i < len(reports)-1 {
				require.Less(t, p.Done, p.Total, "report %d: 100%% only at the end", i)
			}
		}
		prev = p
	}
	last := reports[len(reports)-1]
	require.Equal(t, last.Total, last.Done, "the last report is 100%")
}

// tableWalk is what the reports say one pass did to one table.
type tableWalk struct {
	rows, resealed, skipped int64
	largest                 int64 // the largest batch
}

// rotationWalk splits the reports' running totals by pass and table.
func rotationWalk(reports []store.RotationProgress) map[int]map[string]tableWalk {
	out := map[int]map[string]tableWalk{}
	var prev store.RotationProgress
	for _, p := range reports {
		if out[p.Pass] == nil {
			out[p.Pass] = map[string]tableWalk{}
		}
		w := out[p.Pass][p.Table]
		n := p.Done - prev.Done
		w.rows += n
		w.resealed += p.Resealed - prev.Resealed
		w.skipped += p.Skipped - prev.Skipped
		w.largest = max(w.largest, n)
		out[p.Pass][p.Table] = w
		prev = p
	}
	return out
}

// TestRotateKeyDefaultBatch: batch 0 is DefaultRotationBatch rows per
// transaction.
func TestRotateKeyDefaultBatch(t *testing.T) {
	ctx := context.Background()
	oldKey, newKey := rotateKey(t, 0x11), rotateKey(t, 0x22)
	s := rotateOpen(t, filepath.Join(t.TempDir(), "client.db"), oldKey)
	rotateFill(t, s)
	rows := len(rotatePending(t, s)) + sqlitestore.DefaultRotationBatch + 7
	peers := make([]store.PeerUpdate, sqlitestore.DefaultRotationBatch+7)
	for i := range peers {
		peers[i] = store.PeerUpdate{Peer: store.DeviceAddress{UserID: "bob", DeviceID: int64(i)}}
	}
	_, err := s.CommitSendMany(ctx, rotateID(1), []byte("to every device"), peers) // one transaction
	require.NoError(t, err)

	var reports []store.RotationProgress
	require.NoError(t, s.RotateKey(ctx, newKey, 0, func(p store.RotationProgress) { reports = append(reports, p) }))
	requireProgress(t, reports, true)
	pending := rotationWalk(reports)[1]["pending_outbound_message"]
	require.EqualValues(t, rows, pending.rows)
	require.EqualValues(t, rows, pending.resealed)
	require.EqualValues(t, sqlitestore.DefaultRotationBatch, pending.largest)
	counts := rotateKeyIDs(t, s)
	require.Zero(t, counts[oldKey.ID()], "nothing left under the old key")
}

// TestRotateKeyProgressRowsChange: rows sent or abandoned while the
// rotation runs (here from the progress callback, at the first batch of
// pending messages) make the walk longer or shorter than counted; the
// report stays monotonic and ends at Done == Total.
func TestRotateKeyProgressRowsChange(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change int // rows added (> 0) or abandoned (< 0)
	}{
		{"sent meanwhile", 5},
		{"abandoned meanwhile", -3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			oldKey, newKey := rotateKey(t, 0x11), rotateKey(t, 0x22)
			s := rotateOpen(t, filepath.Join(t.TempDir(), "client.db"), oldKey)
			rotateFill(t, s)
			seqs := rotatePending(t, s)
			require.Greater(t, len(seqs), 4)
			var reports []store.RotationProgress
			changed := false
			require.NoError(t, s.RotateKey(ctx, newKey, 2, func(p store.RotationProgress) {
				reports = append(reports, p)
				if p.Table != "pending_outbound_message" || changed {
					return
				}
				changed = true
				for i := range tc.change {
					_, err := s.InsertPending(ctx, store.DeviceAddress{UserID: "late", DeviceID: 1}, rotateID(1000+i), []byte("late"))
					require.NoError(t, err)
				}
				for _, seq := range seqs[len(seqs)-max(0, -tc.change):] { // the last ones, not walked yet
					after := seq - 1
					page, err := s.PendingMessages(ctx, store.PageRequest{After: &after, Limit: 1})
					require.NoError(t, err)
					require.Len(t, page.Messages, 1)
					gone, err := s.AbandonPendingMessage(ctx, page.Messages[0])
					require.NoError(t, err)
					require.True(t, gone)
				}
			}))
			requireProgress(t, reports, false)
			first, last := reports[0], reports[len(reports)-1]
			require.Equal(t, first.Total+2*int64(tc.change), last.Done, "both passes walked the change")
			if tc.change < 0 {
				require.Equal(t, first.Total, reports[len(reports)-2].Total, "Total as counted until the end")
			}
			require.Zero(t, rotateKeyIDs(t, s)[oldKey.ID()], "nothing left under the old key")
		})
	}
}

// oneCorruptRowSkipped checks that err is the RotationError of a rotation
// that skipped one row, for a corrupt column, and returns it.
func oneCorruptRowSkipped(t *testing.T, err error) *store.RotationError {
	t.Helper()
	require.ErrorIs(t, err, store.ErrRowsSkipped)
	require.ErrorIs(t, err, store.ErrCorruptRow)
	var re *store.RotationError
	require.ErrorAs(t, err, &re)
	require.Len(t, re.Skipped, 1)
	return re
}

// A planted "corrupt" row whose value is only a header naming an old key
// (a BLOB recipient, so it is never opened as a message) keeps no key: the
// header is unauthenticated text anyone can write. The rotation drops the
// old key from the keyring and from storage_key, and reports the row.
func TestRotateKeyPlantedHeaderKeepsNoKey(t *testing.T) {
	ctx := context.Background()
	oldKey, newKey := rotateKey(t, 0x11), rotateKey(t, 0x22)
	s := rotateOpen(t, filepath.Join(t.TempDir(), "client.db"), oldKey)
	want := rotateFill(t, s)
	var v []byte
	require.NoError(t, sqliteaccess.DB(s).QueryRowContext(ctx, "SELECT sealed FROM pending_outbound_message ORDER BY sequence LIMIT 1").Scan(&v))
	// The 10-byte header (magic, version, record type, key id) kept,
	// everything after it zeroed.
	forged := append(append([]byte{}, v[:10]...), make([]byte, len(v)-10)...)
	_, err := sqliteaccess.DB(s).ExecContext(ctx, "INSERT INTO pending_outbound_message (recipient_user_id, recipient_device_id, logical_id, sealed) VALUES (CAST('mallory' AS BLOB), 1, randomblob(16), ?)", forged)
	require.NoError(t, err)

	re := oneCorruptRowSkipped(t, s.RotateKey(ctx, newKey, 2, nil))
	assert.True(t, re.Skipped[0].HasHeader)
	assert.Equal(t, oldKey.ID(), re.Skipped[0].SealedWith)
	assert.False(t, re.Skipped[0].Authentic)
	assert.Empty(t, re.Kept)
	assert.Equal(t, []seal.KeyID{newKey.ID()}, sqliteaccess.Keyring(s).KeyIDs())
	var keys int
	require.NoError(t, sqliteaccess.DB(s).QueryRowContext(ctx, "SELECT count(*) FROM storage_key WHERE key_id = ?", int64(oldKey.ID())).Scan(&keys))
	assert.Zero(t, keys, "the old key's record is deleted")
	only, err := seal.NewKeyring(newKey)
	require.NoError(t, err)
	got := rotateSealed(t, s)
	for name, w := range want {
		pt, err := only.Open(w.rt, w.ad, got[name])
		require.NoError(t, err, name)
		assert.Equal(t, w.plaintext, pt, name)
	}
}

// A rotation to a key whose id is the current key's is refused before
// anything is recorded: records name their key by id, so it would take
// every row for one already re-sealed, replace the key that opens them
// and leave the whole database unreadable. The database and the keyring
// are left as they were, and the current key still opens everything.
func TestRotateKeyRefusesCollidingKeyID(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "client.db")
	current, colliding := storetest.CollidingKeys(t)
	s := rotateOpen(t, path, current)
	want := rotateFill(t, s)
	before := rotateSealed(t, s)
	keysBefore, err := db.New(sqliteaccess.DB(s)).ListStorageKeys(ctx)
	require.NoError(t, err)

	err = s.RotateKey(ctx, colliding, 2, nil)
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	require.ErrorIs(t, err, seal.ErrKey)

	assert.Equal(t, before, rotateSealed(t, s), "no row changed")
	keysAfter, err := db.New(sqliteaccess.DB(s)).ListStorageKeys(ctx)
	require.NoError(t, err)
	assert.Equal(t, keysBefore, keysAfter, "no key recorded")
	assert.Equal(t, []seal.KeyID{current.ID()}, sqliteaccess.Keyring(s).KeyIDs())
	rotateCheck(t, s, current, want)

	require.NoError(t, s.Close())
	rotateCheck(t, rotateOpen(t, path, current), current, want)
}
