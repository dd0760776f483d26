package legacy_test

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
					id := store.NewLogicalMessageID()
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
				requireSealedAs(t, got, before)
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

// A legacy table without the UNIQUE constraint may hold two rows for one
// recipient and logical id, which the sealed table refuses: the later one
// was copied in its batch, failed it, and failed every Open after. It is
// erased like a malformed row and reported (store.ErrCorruptRow and
// store.ErrDuplicate), the first one sealed. Recipients are compared byte
// for byte, as the sealed table's constraint does, whatever collation the
// legacy table declares: ones that differ in case or Unicode normalisation
// are different recipients, and both rows are sealed.
func TestLegacyRepeatedIdentity(t *testing.T) {
	ctx := context.Background()
	const id = "X'00112233445566778899AABBCCDDEEFF'"
	for _, tc := range []struct {
		name   string
		rows   []string // sequence, recipient_user_id, recipient_device_id, logical_id
		erased []int64
	}{
		{"the same recipient and id", []string{"20, 'dave', 1, " + id, "30, 'dave', 1, " + id, "40, 'dave', 1, " + id}, []int64{30, 40}},
		{"the same id, another device", []string{"20, 'dave', 1, " + id, "30, 'dave', 2, " + id}, nil},
		{"the same id, a user id in another case", []string{"20, 'dave', 1, " + id, "30, 'DAVE', 1, " + id}, nil},
		{"the same id, a user id in another normalisation", []string{"20, CAST(X'C3A9' AS TEXT), 1, " + id, "30, CAST(X'65CC81' AS TEXT), 1, " + id}, nil},
		{"a fixture row's recipient and id, at a lower sequence", []string{"-1, (SELECT recipient_user_id FROM pending_outbound_message WHERE sequence = 5), " +
			"(SELECT recipient_device_id FROM pending_outbound_message WHERE sequence = 5), (SELECT logical_id FROM pending_outbound_message WHERE sequence = 5)"}, []int64{5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path, conn := loadLegacy(t)
			// Without the UNIQUE constraint, the user id compared
			// case-blind by the legacy table.
			for _, s := range []string{
				"ALTER TABLE pending_outbound_message RENAME TO strict_legacy",
				`CREATE TABLE pending_outbound_message (sequence INTEGER PRIMARY KEY AUTOINCREMENT,
					recipient_user_id TEXT COLLATE NOCASE, recipient_device_id INTEGER, logical_id BLOB, plaintext BLOB)`,
				"INSERT INTO pending_outbound_message SELECT * FROM strict_legacy",
				"DROP TABLE strict_legacy",
			} {
				_, err := conn.Exec(s)
				require.NoError(t, err, s)
			}
			for _, r := range tc.rows {
				_, err := conn.Exec("INSERT INTO pending_outbound_message VALUES ("+r+", CAST('REPEATED-LEGACY-ROW ' || ? AS BLOB))", r)
				require.NoError(t, err)
			}
			all := readLegacyRows(t, conn)
			require.NoError(t, conn.Close())
			var kept, gone []legacyRow
			for _, r := range all {
				if slices.Contains(tc.erased, r.seq) {
					gone = append(gone, r)
				} else {
					kept = append(kept, r)
				}
			}

			var reports []store.LegacyProgress
			s, err := sqlitestore.Open(ctx, path, fixtureKeyring(t), sqlitestore.WithLegacyUpgrade(), sqlitestore.WithLegacyBatch(2),
				sqlitestore.WithLegacyProgress(func(p store.LegacyProgress) { reports = append(reports, p) }))
			require.NoError(t, err)
			defer s.Close()
			got := listAll(t, s)
			requireSealedAs(t, got, kept)
			require.NotEmpty(t, reports)
			assert.Equal(t, store.LegacySetAside, reports[0].Phase)
			assert.Equal(t, int64(len(kept)), reports[0].Total)
			var erased []int64
			for _, e := range reports[0].Erased {
				erased = append(erased, e.Sequence)
				assert.ErrorIs(t, e.Reason, store.ErrCorruptRow)
				assert.ErrorIs(t, e.Reason, store.ErrDuplicate)
			}
			assert.Equal(t, tc.erased, erased)
			assert.Equal(t, store.LegacyProgress{Phase: store.LegacyErase, Sealed: int64(len(kept)), Total: int64(len(kept))}, reports[len(reports)-1])
			assert.Empty(t, onDisk(t, path, gone), "an erased row's plaintext is gone")
		})
	}
}

// The set-aside report lists the erased rows in sequence order, whichever
// check found each (storage classes, values, repeated identities).
func TestLegacyErasedInSequenceOrder(t *testing.T) {
	ctx := context.Background()
	path, conn := loadLegacy(t)
	for _, s := range relaxLegacy {
		_, err := conn.Exec(s)
		require.NoError(t, err, s)
	}
	for _, s := range []string{
		// A repeated identity, a malformed value, a wrong storage class.
		"UPDATE pending_outbound_message SET recipient_user_id = 'bob', recipient_device_id = 1, logical_id = (SELECT logical_id FROM pending_outbound_message WHERE sequence = 10) WHERE sequence = 1",
		"UPDATE pending_outbound_message SET logical_id = X'00' WHERE sequence = 2",
		"UPDATE pending_outbound_message SET recipient_user_id = NULL WHERE sequence = 3",
	} {
		_, err := conn.Exec(s)
		require.NoError(t, err, s)
	}
	require.NoError(t, conn.Close())
	var first *store.LegacyProgress
	s, err := sqlitestore.Open(ctx, path, fixtureKeyring(t), sqlitestore.WithLegacyUpgrade(), sqlitestore.WithLegacyProgress(func(p store.LegacyProgress) {
		if first == nil {
			first = &p
		}
	}))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NotNil(t, first)
	var got []int64
	for _, e := range first.Erased {
		got = append(got, e.Sequence)
	}
	assert.Equal(t, []int64{2, 3, 10}, got)
	assert.Equal(t, int64(6), first.Total)
}
