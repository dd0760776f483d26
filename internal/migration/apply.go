package migration

// The applier: runs pending files through the caller's transaction and
// records them in schema_revision exactly as Atlas's executor does
// (migrate.Executor.Execute with a revision store over this table), so
// that the Atlas CLI and cmd/migrate read a file the application migrated
// as one they migrated themselves, without linking Atlas's SQLite driver
// (schema inspection, HCL) into every application.

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"ariga.io/atlas/sql/migrate"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/schema"
)

// operatorVersion is what schema_revision's operator_version records for
// the versions this package applies.
const operatorVersion = "securemsg-storage"

// scanStmts splits a migration file into statements with the options
// Atlas's SQLite driver gives its scanner (sqlite.Driver.ScanStmts, which
// the executor uses through migrate.FileStmtDecls): BEGIN ... END blocks
// (trigger bodies) are one statement, and neither BEGIN ATOMIC nor dollar
// quoting exists in SQLite.
func scanStmts(f migrate.File) ([]*migrate.Stmt, error) {
	s := &migrate.Scanner{ScannerOptions: migrate.ScannerOptions{MatchBegin: true}}
	stmts, err := s.Scan(string(f.Bytes()))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrDirectory, f.Name(), err)
	}
	return stmts, nil
}

// stmtTexts returns the text of every statement of f, as scanStmts splits it.
func stmtTexts(f migrate.File) ([]string, error) {
	stmts, err := scanStmts(f)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(stmts))
	for i, s := range stmts {
		out[i] = s.Text
	}
	return out, nil
}

// applier runs files on one transaction and records them.
type applier struct {
	tx  *sql.Tx
	q   *db.Queries
	sum migrate.HashFile
	now func() time.Time
}

// baseline records version f as adopted without running it, as the
// executor's WithBaselineVersion does: type baseline, no statements.
func (a *applier) baseline(ctx context.Context, f migrate.File) error {
	return a.write(ctx, &migrate.Revision{
		Version:     f.Version(),
		Description: f.Desc(),
		Type:        migrate.RevisionTypeBaseline,
	})
}

// execute runs every statement of f and records it applied. On a
// statement's failure it returns an error wrapping a
// *migrate.StmtExecError, as the executor makes it; the caller's
// transaction is then rolled back, revision included.
func (a *applier) execute(ctx context.Context, f migrate.File) error {
	hash, err := a.sum.SumByName(f.Name())
	if err != nil {
		return fmt.Errorf("%w: %s: %v", schema.ErrChecksum, f.Name(), err)
	}
	stmts, err := scanStmts(f)
	if err != nil {
		return err
	}
	start := a.now()
	for _, stmt := range stmts {
		if _, err := a.tx.ExecContext(ctx, stmt.Text); err != nil {
			return fmt.Errorf("migration: apply: %w", &migrate.StmtExecError{File: f, Stmt: stmt, Version: f.Version(), Err: err})
		}
	}
	// What the executor leaves once a file succeeded: every statement
	// applied, the partial hashes (kept only while a file is partly
	// applied) cleared, no error.
	return a.write(ctx, &migrate.Revision{
		Version:       f.Version(),
		Description:   f.Desc(),
		Type:          migrate.RevisionTypeExecute,
		Applied:       len(stmts),
		Total:         len(stmts),
		ExecutionTime: a.now().Sub(start),
		Hash:          hash,
	})
}

// write stores r as the executor's revision store over schema_revision
// did: executed_at in Unix nanoseconds, set at the write as the executor
// sets it; execution_time in nanoseconds; partial hashes joined by commas.
func (a *applier) write(ctx context.Context, r *migrate.Revision) error {
	r.ExecutedAt = a.now()
	r.OperatorVersion = operatorVersion
	err := a.q.UpsertRevision(ctx, db.UpsertRevisionParams{
		Version:         r.Version,
		Description:     r.Description,
		Type:            int64(r.Type),
		Applied:         int64(r.Applied),
		Total:           int64(r.Total),
		ExecutedAt:      r.ExecutedAt.UnixNano(),
		ExecutionTime:   int64(r.ExecutionTime),
		Error:           r.Error,
		ErrorStmt:       r.ErrorStmt,
		Hash:            r.Hash,
		PartialHashes:   strings.Join(r.PartialHashes, ","),
		OperatorVersion: r.OperatorVersion,
	})
	if err != nil {
		return fmt.Errorf("migration: write revision %s: %w", r.Version, err)
	}
	return nil
}
