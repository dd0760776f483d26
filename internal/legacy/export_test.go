package legacy

import (
	"context"
	"database/sql"

	"github.com/securemsg/storage/seal"
)

// Exported for the external tests of this package, which also use
// sqlitestore (itself a user of this package).
var (
	DDL              = ddl
	StepCreateSealed = stepCreateSealed
	StepIndex        = stepIndex
	DefaultReadChunk = readChunk
)

// MigratePlaintext is MigratePlaintextWith with the default options.
func MigratePlaintext(ctx context.Context, conn *sql.DB, keys *seal.Keyring) (int, error) {
	return MigratePlaintextWith(ctx, conn, keys, Options{})
}

// Hooks are the test seams of one run: AfterRow runs after each copied
// row, given the rows copied so far by the call; AfterRead after each read
// of legacy rows by a batch, given how many it read; ReadChunk, if not 0,
// is how many rows a batch reads at a time. Per call, so tests can run in
// parallel.
type Hooks struct {
	AfterRow  func(copied int)
	AfterRead func(rows int)
	ReadChunk int
}

// MigrateHooked is MigratePlaintextWith with h's seams.
func MigrateHooked(ctx context.Context, conn *sql.DB, keys *seal.Keyring, opts Options, h Hooks) (int, error) {
	return migrate(ctx, conn, keys, opts, hooks{afterRow: h.AfterRow, afterRead: h.AfterRead, chunk: h.ReadChunk})
}
