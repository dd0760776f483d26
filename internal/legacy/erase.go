package legacy

// Steps 3 and 4: finishing the copy, then erasing the plaintext from the
// file and its WAL.

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/securemsg/storage/internal/db/legacydb"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/store"
)

// finish is step 3: with every row sealed, it empties the set-aside table,
// makes the proof name no rows (what the set-aside table now holds), and
// restores the high-water mark. Inserting explicit sequences set the
// sealed table's mark to max(sequence); the legacy table's mark (kept by
// the set-aside table) may be higher, its highest rows deleted. Never hand
// out a sequence twice. It is idempotent, as a resumed erase step runs it
// again.
func (m *migrator) finish(ctx context.Context) error {
	return sqltx.Run(ctx, m.conn, func(tx *sql.Tx) error {
		q := legacydb.New(tx)
		left, err := m.left(ctx, q)
		if err != nil {
			return err
		}
		if left != 0 {
			return fmt.Errorf("%d legacy rows left after the last batch", left)
		}
		if err := q.DeleteAllLegacyPending(ctx); err != nil {
			return fmt.Errorf("empty %s: %w", setAside, err)
		}
		if err := m.setVerifier(ctx, q, proofText(newRowsDigest().sum())); err != nil {
			return err
		}
		legacyMark, err := q.SequenceHighWater(ctx, setAside)
		if err != nil {
			return fmt.Errorf("read sqlite_sequence: %w", err)
		}
		sealedMark, err := q.SequenceHighWater(ctx, table)
		if err != nil {
			return fmt.Errorf("read sqlite_sequence: %w", err)
		}
		highWater := max(legacyMark, sealedMark)
		if err := q.DeleteSequenceHighWater(ctx, table); err != nil {
			return fmt.Errorf("reset sqlite_sequence: %w", err)
		}
		if highWater > 0 {
			if err := q.InsertSequenceHighWater(ctx, legacydb.InsertSequenceHighWaterParams{TableName: table, Seq: highWater}); err != nil {
				return fmt.Errorf("restore sqlite_sequence: %w", err)
			}
		}
		moveIndex, err := q.SetAsideIndexCount(ctx)
		if err != nil {
			return fmt.Errorf("read indexes: %w", err)
		}
		if moveIndex > 0 {
			return execStep(ctx, tx, stepIndex)
		}
		return nil
	})
}

// erase is step 4. VACUUM cannot run inside a transaction; it rewrites the
// file from the live content only, so the pages and free space that held
// the moved rows' plaintext are gone, and the TRUNCATE checkpoint copies
// the rewrite into the file and empties the WAL, which held those pages
// too. Only once both have succeeded is the (empty, freshly rewritten)
// set-aside table dropped and the proof replaced by the marked verifier: a
// crash before that leaves the marker and its proof, and the next run
// erases again.
func (m *migrator) erase(ctx context.Context) error {
	m.report(store.LegacyErase)
	if err := execStep(ctx, m.conn, stepVacuum); err != nil {
		return fmt.Errorf("erase: %w", err)
	}
	if err := checkpoint(ctx, m.conn); err != nil {
		return fmt.Errorf("erase: %w", err)
	}
	return sqltx.Run(ctx, m.conn, func(tx *sql.Tx) error {
		if err := execStep(ctx, tx, stepDropPlaintext); err != nil {
			return err
		}
		return m.setVerifier(ctx, legacydb.New(tx), []byte(storeimpl.KeyVerifierSealedQueue))
	})
}

// setVerifier replaces the verifier of the key the migration seals with
// by one sealing text.
func (m *migrator) setVerifier(ctx context.Context, q *legacydb.Queries, text []byte) error {
	id, v, err := storeimpl.SealKeyVerifier(m.keys, text)
	if err != nil {
		return fmt.Errorf("seal storage key verifier: %w", err)
	}
	if err := q.UpdateStorageKeyVerifier(ctx, legacydb.UpdateStorageKeyVerifierParams{KeyID: int64(id), Verifier: v}); err != nil {
		return fmt.Errorf("update storage key verifier: %w", err)
	}
	return nil
}

// setCache sets the page cache of conn's connection (the store runs one)
// to kib KiB, if it is smaller, and returns the function that sets it back.
func setCache(ctx context.Context, conn *sql.DB, kib int) (func(), error) {
	old, err := legacydb.New(conn).CacheSize(ctx)
	if err != nil {
		return nil, fmt.Errorf("read cache_size: %w", err)
	}
	// A negative cache_size is in KiB, a positive one in pages.
	if old < 0 && -old >= int64(kib) {
		return func() {}, nil
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA cache_size = "+strconv.Itoa(-kib)); err != nil {
		return nil, fmt.Errorf("set cache_size: %w", err)
	}
	return func() {
		// Best effort: the cache size is a performance setting, and a
		// failure here changes nothing stored.
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA cache_size = "+strconv.FormatInt(old, 10))
	}, nil
}

// checkpoint runs a TRUNCATE checkpoint and fails unless it completed: a
// checkpoint blocked by a reader leaves WAL frames (which may hold
// plaintext) in place.
func checkpoint(ctx context.Context, conn *sql.DB) error {
	var busy, logFrames, done int
	if err := conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logFrames, &done); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if busy != 0 || (logFrames > 0 && done != logFrames) {
		return fmt.Errorf("checkpoint incomplete: busy %d, %d of %d frames", busy, done, logFrames)
	}
	return nil
}
