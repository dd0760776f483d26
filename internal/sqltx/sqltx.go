// Package sqltx holds the project's one transaction helper. Every storage
// transaction, in the store and in the migration runner, begins here: no
// other code calls BeginTx.
package sqltx

import (
	"context"
	"database/sql"
	"fmt"
)

// Run runs fn inside one transaction on db: it commits if fn returns nil and
// rolls back otherwise, so that a failure leaves nothing partial behind. The
// error returned by fn is passed through unwrapped.
func Run(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	// Rollback after a successful Commit is a no-op returning ErrTxDone.
	defer tx.Rollback() //nolint:errcheck

	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	return nil
}
