package frozen

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Database is a database rendered as SQL text: its schema statements and,
// per table, one INSERT per row in primary key order (rowid order for a
// table without one). Every value is written as a literal of its storage
// class with its exact bytes, so two dumps hold equal INSERTs only if the
// rows are byte-identical.
type Database struct {
	UserVersion int64
	Schema      []string            // CREATE statements in creation order
	Rows        map[string][]string // table -> INSERT statements
	Tables      []string            // tables in creation order (sqlite_sequence last)
	Sequence    map[string]int64    // sqlite_sequence: table -> high-water mark
	// Data holds each table's rows as values, for the proof's checks of
	// what a migration kept, added and changed.
	Data map[string]*Table
}

// Table is one table's rows as SQLite literals (see literal), in key
// order, with what the proof needs to match rows across a migration.
type Table struct {
	Columns []string
	// Key lists the indexes in Columns of the primary key columns; empty
	// for a table without a declared primary key (its rows are matched
	// by their whole content).
	Key    []int
	Values [][]string
	// Defaults maps a column with a DEFAULT clause to the literal its
	// expression evaluates to; a column absent from it defaults to NULL.
	Defaults map[string]string
}

// Dump renders the database behind conn. It returns the database's error
// (wrapped) if a table cannot be read, and an error naming the table and
// column for a value that has no exact SQLite literal (see literal).
func Dump(ctx context.Context, conn *sql.DB) (*Database, error) {
	d := &Database{Rows: map[string][]string{}, Sequence: map[string]int64{}, Data: map[string]*Table{}}
	if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&d.UserVersion); err != nil {
		return nil, fmt.Errorf("frozen: dump: %w", err)
	}
	rows, err := conn.QueryContext(ctx, "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid")
	if err != nil {
		return nil, fmt.Errorf("frozen: dump: %w", err)
	}
	hasSequence := false
	for rows.Next() {
		var typ, name, stmt string
		if err := rows.Scan(&typ, &name, &stmt); err != nil {
			rows.Close()
			return nil, fmt.Errorf("frozen: dump: %w", err)
		}
		if name == "sqlite_sequence" {
			hasSequence = true // SQLite creates it with the first AUTOINCREMENT table
			continue
		}
		d.Schema = append(d.Schema, stmt)
		if typ == "table" {
			d.Tables = append(d.Tables, name)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("frozen: dump: %w", err)
	}
	if hasSequence {
		d.Tables = append(d.Tables, "sqlite_sequence")
	}
	for _, t := range d.Tables {
		ins, data, err := dumpRows(ctx, conn, t, d.Sequence)
		if err != nil {
			return nil, err
		}
		d.Rows[t], d.Data[t] = ins, data
	}
	return d, nil
}

// dumpRows renders every row of table as an INSERT, in key order, and
// as values; the rows of sqlite_sequence also go into seq.
func dumpRows(ctx context.Context, conn *sql.DB, table string, seq map[string]int64) ([]string, *Table, error) {
	keyCols, defaults, err := columnInfo(ctx, conn, table)
	if err != nil {
		return nil, nil, err
	}
	order := "rowid"
	switch {
	case table == "sqlite_sequence":
		order = "name"
	case len(keyCols) > 0:
		quoted := make([]string, len(keyCols))
		for i, c := range keyCols {
			quoted[i] = quoteIdent(c)
		}
		order = strings.Join(quoted, ", ")
	}
	rows, err := conn.QueryContext(ctx, "SELECT * FROM "+quoteIdent(table)+" ORDER BY "+order)
	if err != nil {
		return nil, nil, fmt.Errorf("frozen: dump %s: %w", table, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, nil, err
	}
	data := &Table{Columns: cols, Defaults: defaults}
	for _, k := range keyCols {
		data.Key = append(data.Key, slices.Index(cols, k))
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = quoteIdent(c)
	}
	var out []string
	for rows.Next() {
		vals, err := scanRow(rows, len(cols))
		if err != nil {
			return nil, nil, fmt.Errorf("frozen: dump %s: %w", table, err)
		}
		lits := make([]string, len(vals))
		for i, v := range vals {
			if lits[i], err = literal(v); err != nil {
				return nil, nil, fmt.Errorf("frozen: dump %s column %s: %w", table, cols[i], err)
			}
		}
		data.Values = append(data.Values, lits)
		if table == "sqlite_sequence" {
			name, _ := vals[0].(string)
			n, _ := vals[1].(int64)
			if _, dup := seq[name]; dup {
				return nil, nil, fmt.Errorf("frozen: dump: sqlite_sequence holds two rows for %s", name)
			}
			seq[name] = n
		}
		out = append(out, fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s);", quoteIdent(table), strings.Join(names, ", "), strings.Join(lits, ", ")))
	}
	return out, data, rows.Err()
}

// columnInfo returns table's primary key columns in key order (none for a
// table without a declared key, whose rows are read in rowid order) and
// the literal each DEFAULT expression evaluates to, by column. Key order
// survives a migration that rebuilds a table, which rowid order need not.
func columnInfo(ctx context.Context, conn *sql.DB, table string) ([]string, map[string]string, error) {
	rows, err := conn.QueryContext(ctx, "SELECT name, pk, dflt_value FROM pragma_table_info(?) ORDER BY cid", table)
	if err != nil {
		return nil, nil, fmt.Errorf("frozen: dump: columns of %s: %w", table, err)
	}
	type keyCol struct {
		name string
		pk   int
	}
	var (
		keys  []keyCol
		exprs = map[string]string{}
	)
	for rows.Next() {
		var (
			name string
			pk   int
			dflt sql.NullString
		)
		if err := rows.Scan(&name, &pk, &dflt); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("frozen: dump: columns of %s: %w", table, err)
		}
		if pk > 0 {
			keys = append(keys, keyCol{name, pk})
		}
		if dflt.Valid {
			exprs[name] = dflt.String
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, nil, fmt.Errorf("frozen: dump: columns of %s: %w", table, err)
	}
	slices.SortFunc(keys, func(a, b keyCol) int { return a.pk - b.pk })
	cols := make([]string, len(keys))
	for i, k := range keys {
		cols[i] = k.name
	}
	defaults := map[string]string{}
	for name, expr := range exprs {
		// The expression as the schema declares it, evaluated as ADD
		// COLUMN and INSERT evaluate it.
		var v any
		if err := conn.QueryRowContext(ctx, "SELECT "+expr).Scan(&v); err != nil {
			return nil, nil, fmt.Errorf("frozen: dump: default of %s.%s (%s): %w", table, name, expr, err)
		}
		lit, err := literal(v)
		if err != nil {
			return nil, nil, fmt.Errorf("frozen: dump: default of %s.%s: %w", table, name, err)
		}
		defaults[name] = lit
	}
	return cols, defaults, nil
}

// quoteIdent quotes name as an SQLite identifier, doubling any quote in it.
func quoteIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// scanRow scans the current row of rows, which has n columns, into n
// values as the driver returns them (nil, int64, float64, string or
// []byte). It returns the error of rows.Scan, unwrapped.
func scanRow(rows *sql.Rows, n int) ([]any, error) {
	vals := make([]any, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	return vals, nil
}

// literal renders v as an SQLite literal of the same storage class. A
// value the driver converted from its declared column type (time.Time for
// DATETIME, bool for BOOLEAN) has no exact literal: an error, rather than a
// fixture that loads as something else.
func literal(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "NULL", nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case float64:
		// SQLite reads an out-of-range real literal as infinity.
		if math.IsInf(v, 1) {
			return "9e999", nil
		}
		if math.IsInf(v, -1) {
			return "-9e999", nil
		}
		s := strconv.FormatFloat(v, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0"
		}
		return s, nil
	case string:
		return "'" + strings.ReplaceAll(v, "'", "''") + "'", nil
	case []byte:
		return "X'" + strings.ToUpper(hex.EncodeToString(v)) + "'", nil
	default:
		return "", fmt.Errorf("value of Go type %T (converted by the driver from the declared column type) has no exact SQLite literal", v)
	}
}

// SQL renders d as the fixture.sql of schema version version.
func (d *Database) SQL(version string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "-- FROZEN fixture: a version-%s client database, written by\n", version)
	fmt.Fprintf(&b, "-- `bin/migrate freeze` (see cmd/migrate/README.md). Never edit; see README.md.\n\n")
	fmt.Fprintf(&b, "PRAGMA user_version = %d;\n", d.UserVersion)
	for _, s := range d.Schema {
		fmt.Fprintf(&b, "\n%s;\n", s)
	}
	for _, t := range d.Tables {
		if len(d.Rows[t]) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n-- %s: %d row(s)\n", t, len(d.Rows[t]))
		if t == "sqlite_sequence" {
			// Inserting rows with explicit sequences raised the marks to the
			// highest row; the recorded marks may be above it.
			fmt.Fprintln(&b, "DELETE FROM sqlite_sequence;")
		}
		for _, r := range d.Rows[t] {
			fmt.Fprintln(&b, r)
		}
	}
	return b.Bytes()
}

// rowsOutside counts d's rows in tables other than the migration history
// and sqlite_sequence: the rows a fixture exists to carry.
func (d *Database) rowsOutside() int {
	n := 0
	for _, t := range d.Tables {
		if t != "schema_revision" && t != "sqlite_sequence" {
			n += len(d.Rows[t])
		}
	}
	return n
}

// sameSequence checks that sqlite_sequence is unchanged.
func sameSequence(before, after *Database) error {
	for name, seq := range before.Sequence {
		if got, ok := after.Sequence[name]; !ok || got != seq {
			return fmt.Errorf("sqlite_sequence %s: %d before, %d after (present %v)", name, seq, got, ok)
		}
	}
	for name := range after.Sequence {
		if _, ok := before.Sequence[name]; !ok {
			return fmt.Errorf("sqlite_sequence %s appeared", name)
		}
	}
	return nil
}
