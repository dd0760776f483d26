package legacy_test

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/legacy"
	"github.com/securemsg/storage/store"
)

// count returns a single integer a test-only inspection statement yields.
func count(t *testing.T, conn *sql.DB, query string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, conn.QueryRow(query).Scan(&n))
	return n
}

// onDisk reports which of the legacy plaintexts appear anywhere in the
// database file or its WAL (free pages and free space in pages included).
func onDisk(t *testing.T, path string, rows []legacyRow) []int64 {
	t.Helper()
	var found []int64
	for _, f := range []string{path, path + "-wal"} {
		raw, err := os.ReadFile(f)
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		for _, r := range rows {
			if bytes.Contains(raw, r.plaintext) {
				found = append(found, r.seq)
			}
		}
	}
	return found
}

// An interrupted migration keeps its committed batches, every row in
// exactly one of the two tables, and the next run resumes and ends in the
// same state as an uninterrupted one, in both orders.
func TestLegacyInterruptedResumes(t *testing.T) {
	ctx := context.Background()
	m, err := layoutMigrator()
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		upFirst bool
		batch   int
		stopAt  int // cancel after this many rows copied
		chunk   int // rows read at a time, if not the default
		want    int64
		// neverSealed: the fixture's sealed rows deleted (the migration
		// records the key), not the fixture as it stands.
		neverSealed bool
	}{
		{name: "batch 5 read 2 at a time, cancelled in the second batch", batch: 5, chunk: 2, stopAt: 7, want: 5},
		{name: "batch 2, cancelled in the third batch", batch: 2, stopAt: 5, want: 4},
		{name: "batch 2, cancelled in the third batch, index present", upFirst: true, batch: 2, stopAt: 5, want: 4},
		{name: "batch 3, cancelled in the first batch", batch: 3, stopAt: 1, want: 0},
		{name: "batch 4, cancelled in the last batch, index present", upFirst: true, batch: 4, stopAt: 9, want: 8},
		{name: "never sealed, batch 2, cancelled in the third batch, index present", upFirst: true, batch: 2, stopAt: 5, want: 4, neverSealed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // the hook and the chunk are seams of this call, not globals
			load := loadLegacy
			if tc.neverSealed {
				load = loadNeverSealed
			}
			path, conn := load(t)
			if tc.upFirst {
				_, err := m.Up(ctx, conn)
				require.NoError(t, err)
			}
			before := readLegacyRows(t, conn)
			others := otherTables(t, conn)

			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			copied := 0
			n, err := legacy.MigrateHooked(cctx, conn, fixtureKeyring(t), legacy.Options{Batch: tc.batch}, legacy.Hooks{ReadChunk: tc.chunk, AfterRow: func(n int) {
				copied = n
				if n == tc.stopAt {
					cancel()
				}
			}})
			require.ErrorIs(t, err, context.Canceled)
			assert.Equal(t, tc.want, int64(n), "rows of the committed batches")
			assert.Equal(t, tc.stopAt, copied, "the hook saw every row up to the cancel")

			// Committed batches are sealed: the first rows in sequence
			// order, nothing skipped; the set-aside table keeps every row
			// until all are sealed.
			sealed := count(t, conn, "SELECT count(*) FROM pending_outbound_message")
			assert.Equal(t, tc.want, sealed)
			assert.Equal(t, int64(len(before)), count(t, conn, "SELECT count(*) FROM pending_outbound_message_plaintext"))
			assert.Equal(t, sealed, count(t, conn, `SELECT count(*) FROM pending_outbound_message_plaintext
				WHERE sequence <= (SELECT coalesce(max(sequence), 0) FROM pending_outbound_message)`), "the sealed rows are a prefix")
			assert.Equal(t, sealed, count(t, conn, `SELECT count(*) FROM pending_outbound_message s
				JOIN pending_outbound_message_plaintext p USING (sequence, recipient_user_id, recipient_device_id, logical_id)`))
			if tc.upFirst {
				assert.Equal(t, int64(1), count(t, conn, "SELECT count(*) FROM sqlite_master WHERE name = 'pending_outbound_message_recipient' AND tbl_name = 'pending_outbound_message_plaintext'"),
					"the index stays on the set-aside table, marking that it is to be moved")
			}

			// Resumed: progress counts the earlier run's rows too.
			var reports []store.LegacyProgress
			n, err = legacy.MigratePlaintextWith(ctx, conn, fixtureKeyring(t), legacy.Options{Batch: tc.batch, Progress: func(p store.LegacyProgress) { reports = append(reports, p) }})
			require.NoError(t, err)
			assert.Equal(t, len(before)-int(tc.want), n)
			require.NotEmpty(t, reports)
			assert.Equal(t, store.LegacyProgress{Phase: store.LegacySeal, Sealed: tc.want + int64(min(tc.batch, len(before)-int(tc.want))), Total: int64(len(before))}, reports[0])
			assert.Equal(t, store.LegacyProgress{Phase: store.LegacyErase, Sealed: int64(len(before)), Total: int64(len(before))}, reports[len(reports)-1])
			assert.Empty(t, onDisk(t, path, before), "legacy plaintext left on disk")
			if !tc.upFirst {
				_, err := m.Up(ctx, conn)
				require.NoError(t, err)
			}
			checkMigrated(t, path, conn, before, others)
		})
	}
}

// The erase step is resumable: interrupted after every row was sealed
// (here: the context cancelled as the erase starts, as a kill between the
// last commit and the end of VACUUM would), the plaintext is still in the
// file, the emptied set-aside table marks the erase as owed, and the next
// run (the next Open) erases it.
func TestLegacyEraseResumes(t *testing.T) {
	ctx := context.Background()
	path, conn := loadLegacy(t)
	before := readLegacyRows(t, conn)
	others := otherTables(t, conn)
	// Push every row into the file proper, as a long-running database has.
	_, err := conn.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	require.NoError(t, err)

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var reports []store.LegacyProgress
	n, err := legacy.MigratePlaintextWith(cctx, conn, fixtureKeyring(t), legacy.Options{Batch: 4, Progress: func(p store.LegacyProgress) {
		reports = append(reports, p)
		if p.Phase == store.LegacyErase {
			cancel()
		}
	}})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, len(before), n)
	assert.Equal(t, []store.LegacyProgress{
		{Phase: store.LegacySetAside, Sealed: 0, Total: 9},
		{Phase: store.LegacySeal, Sealed: 4, Total: 9},
		{Phase: store.LegacySeal, Sealed: 8, Total: 9},
		{Phase: store.LegacySeal, Sealed: 9, Total: 9},
		{Phase: store.LegacyErase, Sealed: 9, Total: 9},
	}, reports)
	assert.Equal(t, int64(1), count(t, conn, "SELECT count(*) FROM sqlite_master WHERE name = 'pending_outbound_message_plaintext'"), "the marker is kept")
	assert.Zero(t, count(t, conn, "SELECT count(*) FROM pending_outbound_message_plaintext"))
	_, err = conn.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	require.NoError(t, err)
	require.NotEmpty(t, onDisk(t, path, before), "the deleted plaintext is still in free space (the case the marker exists for)")

	// The next run has nothing to seal, and erases.
	reports = nil
	n, err = legacy.MigratePlaintextWith(ctx, conn, fixtureKeyring(t), legacy.Options{Progress: func(p store.LegacyProgress) { reports = append(reports, p) }})
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Equal(t, []store.LegacyProgress{{Phase: store.LegacyErase, Sealed: 9, Total: 9}}, reports)
	assert.Empty(t, onDisk(t, path, before), "legacy plaintext left on disk")
	assert.Zero(t, count(t, conn, "SELECT count(*) FROM sqlite_master WHERE name = 'pending_outbound_message_plaintext'"), "the marker is gone")

	// Once done, a run is a no-op that reports nothing.
	reports = nil
	n, err = legacy.MigratePlaintextWith(ctx, conn, fixtureKeyring(t), legacy.Options{Progress: func(p store.LegacyProgress) { reports = append(reports, p) }})
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Empty(t, reports)

	m, err := layoutMigrator()
	require.NoError(t, err)
	_, err = m.Up(ctx, conn)
	require.NoError(t, err)
	checkMigrated(t, path, conn, before, others)
}

func TestLegacyOptionsInvalid(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  legacy.Options
		conns int // SetMaxOpenConns, if not 0
	}{
		{"negative batch", legacy.Options{Batch: -1}, 0},
		{"a pool of several connections", legacy.Options{}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, conn := loadLegacy(t)
			if tc.conns != 0 {
				conn.SetMaxOpenConns(tc.conns)
			}
			before := state(t, conn)
			_, err := legacy.MigratePlaintextWith(context.Background(), conn, fixtureKeyring(t), tc.opts)
			require.ErrorIs(t, err, store.ErrInvalidArgument)
			assert.Equal(t, before, state(t, conn))
		})
	}
}

// TestLegacyReadChunk: a batch reads its rows a chunk at a time (the
// default if 0), never more, and the migration ends as with any chunk.
func TestLegacyReadChunk(t *testing.T) {
	for _, tc := range []struct {
		name         string
		batch, chunk int
	}{
		{"batch 5 read 2 at a time", 5, 2},
		{"batch 4 read 1 at a time", 4, 1},
		{"batch 3 read 4 at a time", 3, 4},
		{"default chunk", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path, conn := loadLegacy(t)
			before := readLegacyRows(t, conn)
			others := otherTables(t, conn)
			var reads []int
			n, err := legacy.MigrateHooked(context.Background(), conn, fixtureKeyring(t), legacy.Options{Batch: tc.batch},
				legacy.Hooks{ReadChunk: tc.chunk, AfterRead: func(n int) { reads = append(reads, n) }})
			require.NoError(t, err)
			require.Equal(t, len(before), n)

			// The reads expected: each batch reads full chunks up to its
			// size, a short read ends it, and the migration ends after a
			// batch that came out short.
			batch, chunk := tc.batch, tc.chunk
			if batch == 0 {
				batch = legacy.DefaultBatch
			}
			if chunk == 0 {
				chunk = legacy.DefaultReadChunk
			}
			var want []int
			for left := len(before); ; {
				n := 0
				for n < batch {
					limit := min(chunk, batch-n)
					r := min(limit, left)
					want = append(want, r)
					n, left = n+r, left-r
					if r < limit {
						break
					}
				}
				if n < batch {
					break
				}
			}
			assert.Equal(t, want, reads)
			for _, r := range reads {
				assert.LessOrEqual(t, r, chunk)
			}
			m, err := layoutMigrator()
			require.NoError(t, err)
			_, err = m.Up(context.Background(), conn)
			require.NoError(t, err)
			checkMigrated(t, path, conn, before, others)
		})
	}
}

// A database holding both a legacy-layout table and the set-aside table is
// not a state the migration produces: refused, nothing changed, also on a
// genuine legacy database.
func TestLegacyBothTablesRefused(t *testing.T) {
	_, conn := loadLegacy(t)
	_, err := conn.Exec("CREATE TABLE pending_outbound_message_plaintext (sequence INTEGER PRIMARY KEY, plaintext BLOB)")
	require.NoError(t, err)
	before := state(t, conn)
	_, err = legacy.MigratePlaintext(context.Background(), conn, fixtureKeyring(t))
	require.ErrorIs(t, err, store.ErrPlaintextRefused)
	assert.Equal(t, before, state(t, conn))
}
