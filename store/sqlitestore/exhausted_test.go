package sqlitestore_test

import (
	"context"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/fixtures/version14"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/testkit/fixturekit"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// A pending sequence at the largest int64 (a high-water mark raised
// there, or a row stored there, by a writer other than the store) is
// reported: Open fails with store.ErrSequenceExhausted and changes nothing; a
// send meeting it stores nothing and returns it; Open with
// WithSequenceRestart is the way out, keeping every stored message
// (a row at the maximum is listed, and once the application abandons it
// the next restart frees the sequence). Left to SQLite, every later send
// would fail with "database or disk is full", which names neither the
// cause nor the way out.
func TestSequenceExhausted(t *testing.T) {
	ctx := context.Background()
	bob := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	markAt := func(t *testing.T, s *sqlitestore.Store) int64 {
		var m int64
		require.NoError(t, sqliteaccess.DB(s).QueryRowContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name = 'pending_outbound_message'`).Scan(&m))
		return m
	}
	for _, tc := range []struct {
		name   string
		tamper string
		atMax  bool // a stored row holds the largest sequence
	}{
		{"mark raised", `UPDATE sqlite_sequence SET seq = 9223372036854775807 WHERE name = 'pending_outbound_message'`, false},
		{"row at the maximum", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := dbPath(t)
			kr := storetest.NewKeyring(t)
			s := mustOpenAt(t, path, kr)
			var kept []store.PendingMessage
			for i := 1; i <= 3; i++ {
				kept = append(kept, insert(t, s, bob, i))
			}
			if tc.atMax {
				// A genuine message of the user's moved to the largest
				// sequence.
				m := insert(t, s, bob, 9)
				_, err := sqliteaccess.DB(s).ExecContext(ctx, "UPDATE pending_outbound_message SET sequence = 9223372036854775807 WHERE sequence = ?", m.Sequence)
				require.NoError(t, err)
				_, err = sqliteaccess.DB(s).ExecContext(ctx, "UPDATE sqlite_sequence SET seq = 9223372036854775807 WHERE name = 'pending_outbound_message'")
				require.NoError(t, err)
			}
			require.NoError(t, s.Close())
			if tc.tamper != "" {
				rawExec(t, path, tc.tamper)
			}
			before := dump(t, path)

			_, err := sqlitestore.Open(ctx, path, kr)
			require.ErrorIs(t, err, store.ErrSequenceExhausted)
			require.ErrorContains(t, err, "WithSequenceRestart")
			assert.Equal(t, before, dump(t, path), "nothing changed")

			s, err = sqlitestore.Open(ctx, path, kr, sqlitestore.WithSequenceRestart())
			require.NoError(t, err)
			defer s.Close()
			listed := all(t, s)
			if !tc.atMax {
				assert.Equal(t, kept, listed, "every message kept")
				assert.EqualValues(t, 3, markAt(t, s), "lowered to the highest stored sequence")
				assert.EqualValues(t, 4, insert(t, s, bob, 4).Sequence)
				return
			}
			require.Len(t, listed, 4)
			top := listed[3]
			require.EqualValues(t, int64(math.MaxInt64), top.Sequence)
			assert.Equal(t, kept, listed[:3])

			_, err = s.InsertPending(ctx, bob, storetest.ID(4), []byte("after the maximum"))
			require.ErrorIs(t, err, store.ErrSequenceExhausted)
			n, err := s.PendingMessageCount(ctx, nil)
			require.NoError(t, err)
			assert.EqualValues(t, 4, n, "nothing stored")
			assert.Equal(t, listed, all(t, s))

			gone, err := s.AbandonPending(ctx, top.Recipient, top.ID)
			require.NoError(t, err)
			require.True(t, gone)
			require.NoError(t, s.Close())
			s, err = sqlitestore.Open(ctx, path, kr, sqlitestore.WithSequenceRestart())
			require.NoError(t, err)
			defer s.Close()
			assert.EqualValues(t, 4, insert(t, s, bob, 4).Sequence)
			assert.Len(t, all(t, s), 4)
		})
	}
}

// On a database below head, Open migrates before it checks the pending
// sequence (store.ErrSequenceExhausted's doc): the refusal leaves the mark
// where it is and the migrations committed.
func TestSequenceExhaustedBelowHeadKeepsMigrations(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	require.NoError(t, fixturekit.Load(ctx, path, version14.FixtureSQL()))
	rawExec(t, path,
		"DELETE FROM sqlite_sequence WHERE name = 'pending_outbound_message'",
		"INSERT INTO sqlite_sequence (name, seq) VALUES ('pending_outbound_message', 9223372036854775807)")
	keys, err := seal.NewKeyring(fixturekit.Key())
	require.NoError(t, err)

	_, err = sqlitestore.Open(ctx, path, keys)
	require.ErrorIs(t, err, store.ErrSequenceExhausted)
	require.ErrorContains(t, err, "the mark is left as it is")

	conn := fixturekit.OpenRW(path)
	defer conn.Close()
	var version, mark int64
	require.NoError(t, conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version))
	require.NoError(t, conn.QueryRowContext(ctx, "SELECT seq FROM sqlite_sequence WHERE name = 'pending_outbound_message'").Scan(&mark))
	m, err := migration.Default()
	require.NoError(t, err)
	head, err := strconv.Atoi(m.Head())
	require.NoError(t, err)
	assert.EqualValues(t, head, version, "migrated to head, committed")
	assert.EqualValues(t, int64(math.MaxInt64), mark, "the mark is left as it is")
}
