package legacy_test

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// Legacy rows at the ends of the int64 range are sealed with their
// sequence like any other, exactly once, whether the migration runs
// through or is interrupted after every batch and resumed: the cursor
// names the first sequence not yet sealed, so the smallest int64 is not
// taken for "nothing sealed yet" and the largest ends the walk.
func TestLegacyExtremeSequences(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		seqs []int64 // added to the fixture's rows
	}{
		{"the smallest int64", []int64{math.MinInt64}},
		{"the two smallest", []int64{math.MinInt64, math.MinInt64 + 1}},
		{"the smallest and the largest", []int64{math.MinInt64, math.MaxInt64}},
		{"the largest", []int64{math.MaxInt64}},
	} {
		for _, interrupt := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, interrupted %v", tc.name, interrupt), func(t *testing.T) {
				t.Parallel()
				path, conn := loadLegacy(t)
				for _, seq := range tc.seqs {
					id := ids.NewLogicalMessageID()
					_, err := conn.Exec("INSERT INTO pending_outbound_message VALUES (?, 'bob', 1, ?, ?)", seq, id[:], []byte(fmt.Sprintf("legacy message at %d", seq)))
					require.NoError(t, err)
				}
				before := readLegacyRows(t, conn)
				require.NoError(t, conn.Close())

				// A row at the largest int64 exhausts the sequence: the
				// store opens it only with WithSequenceRestart.
				open := func(ctx context.Context, progress func(store.LegacyProgress)) (*sqlitestore.Store, error) {
					return sqlitestore.Open(ctx, path, fixtureKeyring(t), sqlitestore.WithLegacyUpgrade(),
						sqlitestore.WithLegacyBatch(1), sqlitestore.WithSequenceRestart(), sqlitestore.WithLegacyProgress(progress))
				}
				var last store.LegacyProgress
				if interrupt {
					// Cancelled after each committed batch, then opened again.
					for runs := 0; ; runs++ {
						require.Less(t, runs, len(before)+2, "every run seals a batch")
						cctx, cancel := context.WithCancel(ctx)
						s, err := open(cctx, func(p store.LegacyProgress) {
							last = p
							if p.Phase == store.LegacySeal {
								cancel()
							}
						})
						cancel()
						if err == nil {
							require.NoError(t, s.Close())
							break
						}
						require.ErrorIs(t, err, context.Canceled)
						assert.Equal(t, int64(len(before)), last.Total, "the total counts every row")
					}
				} else {
					s, err := open(ctx, func(p store.LegacyProgress) { last = p })
					require.NoError(t, err)
					require.NoError(t, s.Close())
				}
				assert.Equal(t, store.LegacyProgress{Phase: store.LegacyErase, Sealed: int64(len(before)), Total: int64(len(before))}, last)

				s, err := sqlitestore.Open(ctx, path, fixtureKeyring(t), sqlitestore.WithSequenceRestart())
				require.NoError(t, err)
				defer s.Close()
				got := listAll(t, s)
				require.Len(t, got, len(before))
				for i, w := range before {
					assert.Equal(t, w.seq, got[i].Sequence)
					assert.Equal(t, w.to, got[i].Recipient)
					assert.Equal(t, w.id, got[i].ID)
					assert.Equal(t, w.plaintext, got[i].Plaintext, "sequence %d", w.seq)
				}
				assert.Empty(t, onDisk(t, path, before), "legacy plaintext left on disk")
			})
		}
	}
}

// A legacy table whose sequence column is not its rowid (SQLite types are
// not enforced) may hold a sequence that is not an integer, or one integer
// twice: the migration, which reads, seals and proves rows in sequence
// order, would skip such rows and delete them with the set-aside table.
// Open refuses the table with store.ErrUnknownLayout before anything
// changes the file.
func TestLegacySequenceNotAKeyRefused(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		sequence string // the column's declaration
		value    string // the added row's sequence
	}{
		{"NULL", "sequence INTEGER", "NULL"},
		{"TEXT", "sequence", "'x'"},
		{"REAL", "sequence REAL", "2.5"},
		{"BLOB", "sequence", "X'01'"},
		{"another row's", "sequence INTEGER", "3"},
		{"TEXT, in a WITHOUT ROWID table's key", "sequence INTEGER PRIMARY KEY", "'x'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path, conn := loadLegacy(t)
			without := ""
			if strings.Contains(tc.sequence, "PRIMARY KEY") {
				without = " WITHOUT ROWID"
			}
			for _, s := range []string{
				"ALTER TABLE pending_outbound_message RENAME TO strict_legacy",
				"CREATE TABLE pending_outbound_message (" + tc.sequence + ", recipient_user_id TEXT, recipient_device_id INTEGER, logical_id BLOB, plaintext BLOB)" + without,
				"INSERT INTO pending_outbound_message SELECT * FROM strict_legacy",
				"DROP TABLE strict_legacy",
				"INSERT INTO pending_outbound_message VALUES (" + tc.value + ", 'bob', 1, randomblob(16), CAST('SKIPPED-LEGACY-ROW' AS BLOB))",
			} {
				_, err := conn.Exec(s)
				require.NoError(t, err, s)
			}
			require.NoError(t, conn.Close())
			before, err := os.ReadFile(path)
			require.NoError(t, err)

			_, err = sqlitestore.Open(ctx, path, fixtureKeyring(t), sqlitestore.WithLegacyUpgrade())
			require.ErrorIs(t, err, store.ErrUnknownLayout)
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, before, after, "the file is byte for byte as it was")
			_, err = os.Stat(path + "-wal")
			require.ErrorIs(t, err, fs.ErrNotExist)
		})
	}
}
