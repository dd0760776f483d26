// Package sqltx holds the project's one transaction helper. Every storage
// transaction, in the store and in the migration runner, begins here: no
// other code calls BeginTx.
package sqltx

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Beginner is what a transaction begins on: a *sql.DB, or a *sql.Conn when
// the caller must know which connection the transaction runs on.
type Beginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// Run runs fn inside one transaction on db: it commits if fn returns nil and
// rolls back otherwise, so that a failure leaves nothing partial behind. The
// error returned by fn is passed through, and any error also matches ctx's
// error if ctx ended meanwhile.
func Run(ctx context.Context, db Beginner, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	// Rollback after a successful Commit is a no-op returning ErrTxDone.
	defer tx.Rollback() //nolint:errcheck

	if err := fn(tx); err != nil {
		return withCause(ctx, err)
	}
	if err := tx.Commit(); err != nil {
		return withCause(ctx, fmt.Errorf("commit transaction: %w", err))
	}
	return nil
}

// ReadOnly runs fn inside one transaction on db that is always rolled
// back, so that what fn does is never committed: fn reads one consistent
// snapshot. It returns fn's error, or the error of beginning the
// transaction, matching ctx's error too if ctx ended meanwhile.
func ReadOnly(ctx context.Context, db Beginner, fn func(tx *sql.Tx) error) error {
	errRollback := errors.New("read only")
	err := Run(ctx, db, func(tx *sql.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return errRollback
	})
	if errors.Is(err, errRollback) {
		return nil
	}
	return err
}

// withCause makes err match ctx's error too if ctx ended: database/sql
// rolls a transaction back as soon as its context is cancelled, and a
// statement or Commit racing that rollback reports only sql.ErrTxDone.
func withCause(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%w)", err, cerr)
	}
	return err
}
