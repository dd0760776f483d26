package sqlitestore

import (
	"context"
	"fmt"

	"github.com/securemsg/storage/internal/db"
)

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
		return fmt.Errorf("store: repair pending sequence high-water mark: %w", err)
	}
	if _, err := q.RestorePendingOutboundSequence(ctx); err != nil {
		return fmt.Errorf("store: repair pending sequence high-water mark: %w", err)
	}
	return nil
}
