package migration

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
)

// What lies under the schema's text. Differences holds every object's
// definition to the migrations' and refuses a table or index whose root
// page is another's (sharedRoots), reading sqlite_master only. Whether
// each index holds exactly its table's rows can only be known by reading
// both: Verify does, with SQLite's integrity_check of each table, which
// compares every index entry with its table row (quick_check counts the
// entries but compares none); sqlitestore.Store.Verify and the migrate
// command's verify run it. It relies on PRAGMA integrity_check with a
// table argument, as its table-valued function (SQLite 3.33 and later);
// on no compile option (no dbstat) and no driver's error code.

// sharedRoots returns a Structure difference for every table and index of
// found whose root page is not a b-tree of its own: one another table or
// index also starts at, or no page (not a positive integer). The text of
// an object says nothing of the pages under it: a writer who points an
// index's root page at another object's b-tree (another table's index, a
// table shared by two tables) keeps every text byte for byte, and SQLite
// itself refuses a duplicate root only among the indexes of one table.
// It reads sqlite_master only, so it costs the same at any size: that each
// index's entries are its own table's rows is what
// sqlitestore.Store.Verify checks.
func sharedRoots(found map[objectKey]*objectDef) []Difference {
	byRoot := map[int64][]Object{}
	var out []Difference
	for _, d := range found {
		if d.Type != "table" && d.Type != "index" {
			continue
		}
		// A virtual table has no b-tree (it is unknown anyway).
		if d.Type == "table" && d.root == int64(0) && strings.HasPrefix(strings.ToUpper(strings.TrimSpace(d.text)), "CREATE VIRTUAL") {
			continue
		}
		n, ok := d.root.(int64)
		if !ok || n <= 0 {
			out = append(out, Difference{Object: d.Object, Kind: Structure, Details: []string{fmt.Sprintf("root page %s is no page", Escape(fmt.Sprint(d.root)))}})
			continue
		}
		byRoot[n] = append(byRoot[n], d.Object)
	}
	for n, objs := range byRoot {
		if len(objs) < 2 {
			continue
		}
		for _, o := range objs {
			var others []string
			for _, p := range objs {
				if p != o {
					others = append(others, p.String())
				}
			}
			sort.Strings(others)
			out = append(out, Difference{Object: o, Kind: Structure,
				Details: []string{fmt.Sprintf("root page %d is also that of %s", n, strings.Join(others, ", "))}})
		}
	}
	return out
}

// VerifyProgress is what Verify reports after each table.
type VerifyProgress struct {
	// Table is the table just checked, with its indexes.
	Table string
	// Done tables of Total are checked.
	Done, Total int
}

// The verification's queries: sqlc cannot type the pragma function, so
// they stay here beside the code that reads them, as the introspection
// queries do.
const (
	verifyTablesQuery = `SELECT name FROM sqlite_master WHERE type = 'table' AND rootpage > 0 ORDER BY name`
	verifyTableQuery  = `SELECT integrity_check FROM pragma_integrity_check(?)`
)

// Verify checks every b-tree table of the database behind conn and its
// indexes with integrity_check, one table at a time, each in a statement
// of its own, calling progress (if not nil) after each. It returns every
// problem found, one line each naming its table, with SQLite's text
// escaped (an index entry no row holds, a row missing from an index, an
// index of the wrong number of entries, a damaged page); the context's
// error if ctx ends first (SQLite is interrupted); or an error reading
// the database. Its cost grows with the file: every page of every table
// and index is read. It only reads conn.
func Verify(ctx context.Context, conn *sql.DB, progress func(VerifyProgress)) ([]string, error) {
	var tables []string
	err := eachRow(ctx, conn, verifyTablesQuery, nil, func(scan func(...any) error) error {
		var name string
		if err := scan(&name); err != nil {
			return err
		}
		tables = append(tables, name)
		return nil
	})
	if err != nil {
		return nil, err
	}
	var problems []string
	for i, table := range tables {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("migration: verify: %w", err)
		}
		err := eachRow(ctx, conn, verifyTableQuery, []any{table}, func(scan func(...any) error) error {
			var line string
			if err := scan(&line); err != nil {
				return err
			}
			if line != "ok" {
				problems = append(problems, fmt.Sprintf("table %s: %s", Escape(table), Escape(line)))
			}
			return nil
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("migration: verify: %w", ctx.Err())
			}
			return nil, err
		}
		if progress != nil {
			progress(VerifyProgress{Table: table, Done: i + 1, Total: len(tables)})
		}
	}
	return problems, nil
}
