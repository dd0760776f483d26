// Package legacy migrates the legacy plaintext layout of the pending
// outbound queue (the spec's LegacyPlaintextMigration): databases written
// before records were sealed, whose pending_outbound_message has a
// plaintext BLOB column where version 14 has sealed.
//
// MigratePlaintext rebuilds that table sealed, in one transaction: it sets
// the legacy table aside, creates the table exactly as the version-14 DDL
// (AUTOINCREMENT included), copies every row with its sequence and its
// plaintext sealed (record type 5, bound by store.MessageAD to recipient
// and logical id), restores the sqlite_sequence high-water mark that a
// rebuild would otherwise reset, drops the legacy table and recreates the
// version-15 index pending_outbound_message_recipient if the database had
// it. A database already sealed is left alone.
//
// Order. A client runs the schema migrations first and this data migration
// after (migration.Up, then MigratePlaintext, then sqlitestore.Open), as the
// Kotlin client ran SQLDelight's migrations before LegacyPlaintextMigration.
// Both orders end in the same state: on a version-14 legacy database that
// was not migrated yet, the index does not exist, MigratePlaintext does not
// create it, and migration 15 adds it afterwards (creating it here would
// make migration 15 fail on an existing index). On a database migrated to
// 15 the rebuild drops the index with the legacy table and recreates it.
//
// Every data statement is a sqlc-generated query (queries/legacy/ compiled
// into internal/db/legacydb against the head schema plus
// schema/legacy/pending_outbound_plaintext.sql, a declaration for sqlc only,
// never applied). The DDL steps, which sqlc cannot express as queries, are
// the reviewed files in sql/, embedded and executed in order. The
// transaction is the project's one helper, internal/sqltx.Run.
//
// Package legacy never deletes a message, never renumbers a sequence,
// never writes plaintext anywhere, never touches any other table, and
// never leaves a half-migrated table: on any error (a malformed row, a
// cancelled context, a keyring that is not the database's) nothing is
// changed.
package legacy

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"slices"

	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/internal/db/legacydb"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// Errors returned (wrapped) by MigratePlaintext.
var (
	// ErrUnknownLayout means pending_outbound_message has neither the
	// legacy plaintext layout nor the sealed one.
	ErrUnknownLayout = errors.New("legacy: unknown pending_outbound_message layout")
	// ErrKeyNotRecorded means the keyring's current key is not the
	// database's active storage key: rows sealed with it would not open.
	ErrKeyNotRecorded = errors.New("legacy: keyring's current key is not the database's active storage key")
)

// The DDL steps, in order (see the files for what each does).
//
//go:embed sql/*.sql
var ddl embed.FS

const (
	stepSetAside      = "sql/1_set_aside.sql"
	stepCreateSealed  = "sql/2_create_sealed.sql"
	stepDropPlaintext = "sql/3_drop_plaintext.sql"
	stepIndex         = "sql/4_recipient_index.sql"
	stepVacuum        = "sql/5_vacuum.sql"
)

const table = "pending_outbound_message"

// The legacy table's columns, in order.
var legacyColumns = []string{"sequence", "recipient_user_id", "recipient_device_id", "logical_id", "plaintext"}

// copyBatch is how many legacy rows are read at a time (all within the one
// transaction).
const copyBatch = 256

// testHookAfterRow, if set (by tests), runs after each row is copied.
var testHookAfterRow func(copied int)

// MigratePlaintext rebuilds a legacy plaintext pending_outbound_message
// sealed with keys' current key, in one transaction, and returns the number
// of rows it sealed. On a database whose table is already sealed (or has no
// such table) it changes nothing and returns 0, so it is safe to run on
// every start.
//
// It returns an error wrapping ErrUnknownLayout for a table it does not
// recognise, ErrKeyNotRecorded if storage_key records active keys and keys'
// current key is not one of them, ids.ErrInvalid for a row whose logical id
// or recipient is malformed, or the context's error; in every error case
// the database is unchanged.
func MigratePlaintext(ctx context.Context, conn *sql.DB, keys *seal.Keyring) (int, error) {
	if conn == nil || keys == nil {
		return 0, fmt.Errorf("legacy: migrate plaintext: %w: nil database or keyring", store.ErrInvalidArgument)
	}
	var copied int
	err := sqltx.Run(ctx, conn, func(tx *sql.Tx) error {
		copied = 0
		q := legacydb.New(tx)
		cols, err := q.PendingOutboundColumns(ctx)
		if err != nil {
			return fmt.Errorf("read %s columns: %w", table, err)
		}
		switch {
		case len(cols) == 0:
			return nil // no such table: nothing to do
		case !slices.Contains(cols, "plaintext") && slices.Contains(cols, "sealed"):
			return nil // already sealed: nothing to do
		case !slices.Equal(cols, legacyColumns):
			return fmt.Errorf("%w: columns %v", ErrUnknownLayout, cols)
		}

		active, err := q.ActiveStorageKeyIDs(ctx)
		if err != nil {
			return fmt.Errorf("read storage keys: %w", err)
		}
		if len(active) > 0 && !slices.Contains(active, int64(keys.Current())) {
			return fmt.Errorf("%w: current key %d, active %v", ErrKeyNotRecorded, keys.Current(), active)
		}
		hadIndex, err := q.PendingOutboundIndexCount(ctx)
		if err != nil {
			return fmt.Errorf("read indexes: %w", err)
		}
		oldHighWater, err := q.SequenceHighWater(ctx, table)
		if err != nil {
			return fmt.Errorf("read sqlite_sequence: %w", err)
		}

		if err := execStep(ctx, tx, stepSetAside); err != nil {
			return err
		}
		if err := execStep(ctx, tx, stepCreateSealed); err != nil {
			return err
		}
		maxSeq, err := copySealed(ctx, q, keys, &copied)
		if err != nil {
			return err
		}
		// Inserting explicit sequences set the new table's mark to
		// max(sequence); the legacy table's mark may have been higher (its
		// highest rows deleted). Never hand out a sequence twice.
		highWater := max(oldHighWater, maxSeq)
		if err := q.DeleteSequenceHighWater(ctx, table); err != nil {
			return fmt.Errorf("reset sqlite_sequence: %w", err)
		}
		if highWater > 0 {
			if err := q.InsertSequenceHighWater(ctx, legacydb.InsertSequenceHighWaterParams{TableName: table, Seq: highWater}); err != nil {
				return fmt.Errorf("restore sqlite_sequence: %w", err)
			}
		}
		if err := execStep(ctx, tx, stepDropPlaintext); err != nil {
			return err
		}
		if hadIndex > 0 {
			if err := execStep(ctx, tx, stepIndex); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("legacy: migrate plaintext: %w", err)
	}
	if copied > 0 {
		// The migration has committed; a failure here leaves the legacy
		// plaintext in free pages (as a crash right now would) and is
		// reported, but nothing is lost and the next open does not redo it.
		if err := execStep(ctx, conn, stepVacuum); err != nil {
			return copied, fmt.Errorf("legacy: migrate plaintext: erase free pages: %w", err)
		}
	}
	return copied, nil
}

// copySealed copies every legacy row into the sealed table, keeping its
// sequence, and returns the largest sequence copied.
func copySealed(ctx context.Context, q *legacydb.Queries, keys *seal.Keyring, copied *int) (int64, error) {
	after := int64(0)
	for {
		rows, err := q.LegacyPendingBatch(ctx, legacydb.LegacyPendingBatchParams{AfterSequence: after, RowLimit: copyBatch})
		if err != nil {
			return 0, fmt.Errorf("read legacy rows: %w", err)
		}
		for _, r := range rows {
			after = r.Sequence
			to := ids.DeviceAddress{UserID: r.RecipientUserID, DeviceID: r.RecipientDeviceID}
			if err := to.Validate(); err != nil {
				return 0, fmt.Errorf("legacy sequence %d: %w", r.Sequence, err)
			}
			id, err := ids.ParseLogicalMessageID(r.LogicalID)
			if err != nil {
				return 0, fmt.Errorf("legacy sequence %d: %w", r.Sequence, err)
			}
			sealed, err := keys.Seal(seal.RecordPendingOutbound, store.MessageAD(to, id), r.Plaintext)
			clear(r.Plaintext)
			if err != nil {
				return 0, fmt.Errorf("legacy sequence %d: %w", r.Sequence, err)
			}
			err = q.InsertSealedPendingWithSequence(ctx, legacydb.InsertSealedPendingWithSequenceParams{
				Sequence: r.Sequence, RecipientUserID: to.UserID, RecipientDeviceID: to.DeviceID, LogicalID: id[:], Sealed: sealed,
			})
			if err != nil {
				return 0, fmt.Errorf("legacy sequence %d: copy: %w", r.Sequence, err)
			}
			*copied++
			if testHookAfterRow != nil {
				testHookAfterRow(*copied)
			}
		}
		if len(rows) < copyBatch {
			return after, nil
		}
	}
}

// execer is a transaction, or the database for the step that runs after
// the transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func execStep(ctx context.Context, tx execer, name string) error {
	stmts, err := ddl.ReadFile(name)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if _, err := tx.ExecContext(ctx, string(stmts)); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
