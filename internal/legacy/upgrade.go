package legacy

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/db/legacydb"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// LayoutVersion is the schema version the legacy plaintext layout belongs
// to: the newest version whose pending_outbound_message this package
// rebuilds sealed (version 14's table, with version 15's index where the
// database has it). A later migration may change that table in any way;
// it runs on the sealed table, after this package.
const LayoutVersion = "15"

// Upgrade migrates the database behind conn to m's head and seals a legacy
// plaintext pending queue on the way (what sqlitestore.Open does with
// WithLegacyUpgrade). A database in the legacy layout, or with a migration
// under way, is migrated only up to LayoutVersion, sealed (or resumed) by
// MigratePlaintextWith, and then migrated to head: every migration above
// LayoutVersion runs on the sealed table, as on any other database. Any
// other database is migrated to head. It returns the number of rows
// sealed, and the errors of migration.Migrator.Up and of
// MigratePlaintextWith; an error wrapping store.ErrUnknownLayout for a legacy
// layout in a database already above LayoutVersion, which no migration
// of this library could have left, changing nothing.
func Upgrade(ctx context.Context, conn *sql.DB, m *migration.Migrator, keys seal.Sealer, opts Options) (int, error) {
	if conn == nil || m == nil {
		return 0, fmt.Errorf("legacy: upgrade: %w: nil database or migrator", store.ErrInvalidArgument)
	}
	found, err := Found(ctx, conn)
	if err != nil {
		return 0, err
	}
	if !found {
		if _, err := m.Up(ctx, conn); err != nil {
			return 0, err
		}
		return 0, nil
	}
	first := m
	if slices.Contains(m.Versions(), LayoutVersion) {
		if first, err = m.Through(LayoutVersion); err != nil {
			return 0, err
		}
	}
	// A database above LayoutVersion is left to MigratePlaintextWith,
	// which refuses it, saying why (its key records, or its version).
	if belowLayout(ctx, conn) == nil {
		if _, err := first.Up(ctx, conn); err != nil {
			return 0, err
		}
	}
	n, err := MigratePlaintextWith(ctx, conn, keys, opts)
	if err != nil {
		return n, err
	}
	if _, err := m.Up(ctx, conn); err != nil {
		return n, err
	}
	return n, nil
}

// belowLayout returns an error wrapping store.ErrUnknownLayout if the database
// is at a schema version above LayoutVersion (PRAGMA user_version, which
// every migration sets): its pending table went through migrations that
// this package's rebuild would undo.
func belowLayout(ctx context.Context, conn legacydb.DBTX) error {
	v, err := db.New(conn).UserVersion(ctx)
	if err != nil {
		return fmt.Errorf("read user_version: %w", err)
	}
	if limit, _ := strconv.ParseInt(LayoutVersion, 10, 64); v > limit {
		return fmt.Errorf("%w: %s in the legacy layout in a database at schema version %d, above version %s, the one the layout belongs to", store.ErrUnknownLayout, table, v, LayoutVersion)
	}
	return nil
}
