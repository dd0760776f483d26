package sqlitestore

import (
	"context"
	"fmt"
	"strings"

	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/store"
)

// VerifyProgress is what Verify reports after each table it checked.
type VerifyProgress = migration.VerifyProgress

// Verify checks that every index of the file holds exactly the rows of its
// table, and every page of each table is sound: SQLite's integrity_check
// of each table and its indexes, one table at a time. Open checks what
// reading the schema can (every object's definition, and that no two
// tables or indexes share a b-tree) and no more, so that it costs the same
// at any size; an index whose entries a writer of the file forged on pages
// of its own, emptied or padded passes Open, and is what this finds. The
// store's deletes, updates and processed-id lookups judge a row by the
// table row itself, so such an index cannot make them change another
// row; it can still hide rows from the reads that walk it, until Verify
// reports it. Its cost grows with the file (BENCHMARKS.md has it at 1M
// pending messages): run it when the application can spare it, not on
// every start.
//
// progress, if not nil, is called on the calling goroutine after each
// table. It returns an error wrapping store.ErrCorruptIndex naming each
// table and what SQLite found wrong (escaped); the context's error if ctx
// ends first (the check is interrupted); store.ErrClosed; or a storage
// error. It changes nothing.
func (s *Store) Verify(ctx context.Context, progress func(VerifyProgress)) error {
	var problems []string
	err := s.tx(ctx, statement, func(*txn) error {
		var err error
		problems, err = migration.Verify(ctx, s.conn, progress)
		return err
	})
	if err == nil && len(problems) > 0 {
		err = fmt.Errorf("%w: %s", store.ErrCorruptIndex, strings.Join(problems, "; "))
	}
	if err != nil {
		return storeimpl.OpVerify.Wrap(err)
	}
	return nil
}
