package sqlitestore_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/testkit/storetest"
)

// Open repairs a pending sequence high-water mark (sqlite_sequence) that a
// writer other than the store lowered below the highest stored sequence,
// or deleted: once the highest row is deleted, the next insert still gets
// a sequence never handed out, not the deleted row's again: a sequence is
// the cursor pages and retries resume from. A mark above the highest
// stored row (its rows deleted) is never lowered, and on an intact
// database Open changes no byte.
func TestOpenRepairsLoweredSequence(t *testing.T) {
	ctx := context.Background()
	const mark = `SELECT group_concat(seq) FROM sqlite_sequence WHERE name = 'pending_outbound_message'`
	tests := []struct {
		name     string
		deleted  int    // how many of the highest rows are deleted before the tampering
		tamper   string // run with plain SQL on the closed database
		wantMark int64  // the high-water mark after the reopen
	}{
		{"lowered", 0, `UPDATE sqlite_sequence SET seq = 1 WHERE name = 'pending_outbound_message'`, 5},
		{"lowered below zero", 0, `UPDATE sqlite_sequence SET seq = -7 WHERE name = 'pending_outbound_message'`, 5},
		{"lowered as TEXT", 0, `UPDATE sqlite_sequence SET seq = '1' WHERE name = 'pending_outbound_message'`, 5},
		{"lowered as REAL", 0, `UPDATE sqlite_sequence SET seq = 1.5 WHERE name = 'pending_outbound_message'`, 5},
		{"lowered as BLOB", 0, `UPDATE sqlite_sequence SET seq = CAST('1' AS BLOB) WHERE name = 'pending_outbound_message'`, 5},
		{"row deleted", 0, `DELETE FROM sqlite_sequence WHERE name = 'pending_outbound_message'`, 5},
		{"lowered under deleted rows", 2, `UPDATE sqlite_sequence SET seq = 1 WHERE name = 'pending_outbound_message'`, 3},
		{"intact", 0, "", 5},
		{"intact above the stored rows", 2, "", 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := dbPath(t)
			kr := storetest.NewKeyring(t)
			s := mustOpenAt(t, path, kr)
			for i := 1; i <= 5; i++ {
				require.EqualValues(t, i, insert(t, s, alice, i).Sequence)
			}
			for i := 5; i > 5-tt.deleted; i-- {
				ok, err := s.AbandonPending(ctx, alice, storetest.ID(i))
				require.NoError(t, err)
				require.True(t, ok)
			}
			require.NoError(t, s.Close())
			if tt.tamper != "" {
				rawExec(t, path, tt.tamper)
			}
			before := dump(t, path)

			s = mustOpenAt(t, path, kr)
			hw, err := sqliteaccess.SequenceHighWater(ctx, s)
			require.NoError(t, err)
			require.Equal(t, tt.wantMark, hw)
			if tt.tamper == "" {
				require.NoError(t, s.Close())
				require.Equal(t, before, dump(t, path), "Open changed an intact database")
				s = mustOpenAt(t, path, kr)
			}
			var got string
			require.NoError(t, sqliteaccess.DB(s).QueryRow(mark).Scan(&got))
			require.Equal(t, strconv.FormatInt(tt.wantMark, 10), got, "one row, raised (a higher mark is kept)")

			// The highest stored row goes (an ACK): the next send still
			// gets a sequence above every one handed out before the repair.
			top := 5 - tt.deleted
			ok, err := s.AbandonPending(ctx, alice, storetest.ID(top))
			require.NoError(t, err)
			require.True(t, ok)
			next := insert(t, s, bob, 100)
			require.Greater(t, next.Sequence, int64(top), "a used sequence was handed out again")
			require.Equal(t, tt.wantMark+1, next.Sequence)
			require.Len(t, all(t, s), top, "the other rows are untouched")
		})
	}
}
