package sqlitestore

import (
	"context"
	"fmt"
	"math"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/store"
)

// WithSequenceRestart makes Open lower a pending sequence high-water mark
// found at the largest int64 to the highest sequence stored (0 if none),
// in the transaction that checks the key; no stored message changes.
// Sequences above the highest stored one that were handed out before
// (to messages since acknowledged or abandoned) may be handed out again:
// they cannot be told from a mark a writer raised. If a stored message
// holds the largest sequence itself, sends keep failing with
// store.ErrSequenceExhausted until the application removes it (a page lists
// it like any other; client.Client.AbandonPendingMessage) and opens with
// WithSequenceRestart again.
func WithSequenceRestart() Option {
	return func(o *options) { o.restart = true }
}

// checkSequence fails with store.ErrSequenceExhausted if the pending sequence's
// high-water mark is at the largest int64, or, with restart, lowers it.
// It runs after repairSequence, in the same transaction.
func checkSequence(ctx context.Context, q *db.Queries, restart bool) error {
	mark, err := q.PendingOutboundSequenceHighWater(ctx)
	if err != nil {
		return fmt.Errorf("read pending sequence high-water mark: %w", err)
	}
	if mark != math.MaxInt64 {
		return nil
	}
	if !restart {
		return fmt.Errorf("%w: open with sqlitestore.WithSequenceRestart to lower it to the highest stored sequence; the mark is left as it is", store.ErrSequenceExhausted)
	}
	if _, err := q.LowerPendingOutboundSequence(ctx); err != nil {
		return fmt.Errorf("lower pending sequence high-water mark: %w", err)
	}
	return nil
}

// exhausted returns store.ErrSequenceExhausted if err, an insert's error, is
// SQLite's "database or disk is full" because the high-water mark is at
// the largest int64 (what AUTOINCREMENT fails with then), err otherwise.
func exhausted(ctx context.Context, q *db.Queries, err error) error {
	if !sqlitedriver.IsFull(err) {
		return err
	}
	if mark, qerr := q.PendingOutboundSequenceHighWater(ctx); qerr != nil || mark != math.MaxInt64 {
		return err
	}
	return fmt.Errorf("%w: nothing stored; reopen the store with sqlitestore.WithSequenceRestart", store.ErrSequenceExhausted)
}

// repairSequence raises the pending sequence's high-water mark (its
// sqlite_sequence row) to the highest sequence stored, if a writer other
// than the store lowered it or deleted it: SQLite would still hand out a
// sequence above every stored row, but once the highest rows were deleted
// (acknowledged, abandoned) it would hand theirs out again, and a sequence
// is the one cursor pages and retries resume from. A mark lowered below
// sequences that were handed out and deleted is not detectable: those can
// still be reused (SECURITY.md). On an intact database it changes nothing.
// It runs in Open's transaction that checks the storage key.
func repairSequence(ctx context.Context, q *db.Queries) error {
	if _, err := q.RaisePendingOutboundSequence(ctx); err != nil {
		return fmt.Errorf("repair pending sequence high-water mark: %w", err)
	}
	if _, err := q.RestorePendingOutboundSequence(ctx); err != nil {
		return fmt.Errorf("repair pending sequence high-water mark: %w", err)
	}
	return nil
}
