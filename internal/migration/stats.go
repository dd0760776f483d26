package migration

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"

	"github.com/securemsg/storage/internal/db"
)

// ClearStatistics deletes every row of SQLite's planner statistics
// (sqlite_stat1, sqlite_stat4) in the database behind tx and reloads the
// connection's copy (SQLite's reload keeps an index's "unordered" flag,
// so sqlitestore.Open plans on a new connection after it, see
// HoldsStatistics): the store's queries are planned as on a
// database that was never analysed: the
// store never runs ANALYZE, so any statistics a file holds were written
// by someone else, and rows claiming an index useless can turn an indexed
// page into a scan of the whole table. The tables themselves stay (SQLite
// creates them; Differences holds them to SQLite's definition). It
// returns how many rows it deleted. Up calls it in its transaction.
func ClearStatistics(ctx context.Context, tx *sql.Tx) (int64, error) {
	var deleted int64
	for _, name := range statTables() {
		n, err := db.New(tx).TableCount(ctx, name)
		if err != nil {
			return 0, fmt.Errorf("migration: clear statistics: %w", err)
		}
		if n == 0 {
			continue
		}
		// name is one of sqliteStats' keys, not text from the file.
		res, err := tx.ExecContext(ctx, "DELETE FROM "+name)
		if err != nil {
			return 0, fmt.Errorf("migration: clear statistics: %s: %w", name, err)
		}
		rows, err := res.RowsAffected()
		if err != nil {
			return 0, fmt.Errorf("migration: clear statistics: %s: %w", name, err)
		}
		deleted += rows
	}
	if deleted > 0 {
		// SQLite loads the statistics with the schema and rereads them
		// only on ANALYZE: this form analyses nothing and reloads them.
		if _, err := tx.ExecContext(ctx, "ANALYZE sqlite_master"); err != nil {
			return 0, fmt.Errorf("migration: clear statistics: reload: %w", err)
		}
	}
	return deleted, nil
}

// HoldsStatistics reports whether the database behind conn holds planner
// statistics (rows in sqlite_stat1 or sqlite_stat4). A connection that
// loaded them keeps part of them (an index's "unordered" flag) across
// ClearStatistics' reload, so sqlitestore.Open, finding some before it
// migrates, plans on a new connection afterwards; a file whose tables are
// empty costs no second connection.
func HoldsStatistics(ctx context.Context, conn *sql.DB) (bool, error) {
	for _, name := range statTables() {
		n, err := db.New(conn).TableCount(ctx, name)
		if err != nil {
			return false, fmt.Errorf("migration: look for statistics: %w", err)
		}
		if n == 0 {
			continue
		}
		var held int
		// name is one of sqliteStats' keys, not text from the file.
		if err := conn.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM "+name+")").Scan(&held); err != nil {
			return false, fmt.Errorf("migration: look for statistics: %s: %w", name, err)
		}
		if held != 0 {
			return true, nil
		}
	}
	return false, nil
}

// statTables are the names of SQLite's statistics tables (sqliteStats'
// keys), sorted: they are read and cleared in a fixed order.
func statTables() []string { return slices.Sorted(maps.Keys(sqliteStats)) }
