package pipeline

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"

	"ariga.io/atlas/sql/schema"
	"ariga.io/atlas/sql/sqlite"
)

// inspectAgainst inspects the schema of the database behind conn for a
// diff with want (a head or a version's schema, inspected with
// InspectRealm). Atlas's SQLite inspector reads each table's indexes with
// a query that scans the whole schema table, so inspecting every table of
// a file costs the square of its table count (a file planted with 20,000
// tables takes minutes). Only the tables want also has are inspected in
// full; any other table is added by name alone, which is all a diff needs
// to drop it, so the cost stays linear in the file's schema. The tables
// keep the order the database lists them in.
func inspectAgainst(ctx context.Context, conn *sql.DB, want *schema.Realm) (*schema.Realm, error) {
	names, err := tableNames(ctx, conn)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, t := range tables(want) {
		known[t.Name] = true
	}
	var inspect []string
	for _, n := range names {
		if known[n] {
			inspect = append(inspect, n)
		}
	}
	drv, err := sqlite.Open(linearIndexes{conn})
	if err != nil {
		return nil, fmt.Errorf("migration: open atlas driver: %w", err)
	}
	opts := &schema.InspectOptions{Tables: inspect}
	if len(inspect) == 0 {
		// No filter would inspect every table: ask for none at all.
		opts.Mode = schema.InspectSchemas
	}
	s, err := drv.InspectSchema(ctx, "", opts)
	if err != nil {
		return nil, fmt.Errorf("migration: inspect schema: %w", err)
	}
	inspected := map[string]*schema.Table{}
	for _, t := range s.Tables {
		inspected[t.Name] = t
	}
	ordered := make([]*schema.Table, 0, len(names))
	for _, n := range names {
		t, ok := inspected[n]
		if !ok {
			t = &schema.Table{Name: n, Schema: s}
		}
		ordered = append(ordered, t)
	}
	s.Tables = ordered
	if s.Realm == nil {
		schema.NewRealm(s)
	}
	normalizeAutoindexNames(s.Realm)
	return s.Realm, nil
}

// atlasIndexesRE matches the query Atlas's SQLite inspector lists one
// table's indexes with: pragma_index_list joined with the schema table on
// the index name, which SQLite runs as a scan of the whole schema table for
// every index of the table (a table planted with 20,000 indexes takes
// minutes).
var atlasIndexesRE = regexp.MustCompile("^SELECT `il`.`name`, `il`.`unique`, `il`.`origin`, `il`.`partial`, `m`.`sql` FROM pragma_index_list\\('((?:[^']|'')*)'\\) AS il JOIN sqlite_master AS m ON il.name = m.name$")

// linearIndexesQuery is atlasIndexesRE's query with the same rows in the
// same order (the schema table's), each side read once and joined
// through an automatic index, so that listing a table's indexes costs the
// size of the schema, not its product with the table's index count.
const linearIndexesQuery = "WITH il AS MATERIALIZED (SELECT * FROM pragma_index_list('%s')), " +
	"m AS MATERIALIZED (SELECT rowid AS r, name, sql FROM sqlite_master) " +
	"SELECT il.name, il.\"unique\", il.origin, il.partial, m.sql FROM il JOIN m ON il.name = m.name ORDER BY m.r"

// linearIndexes runs Atlas's inspection queries on conn, with the index
// listing (atlasIndexesRE) replaced by linearIndexesQuery; any other
// query, or another form of it, runs as it is.
type linearIndexes struct{ conn *sql.DB }

func (l linearIndexes) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if m := atlasIndexesRE.FindStringSubmatch(query); m != nil && len(args) == 0 {
		query = fmt.Sprintf(linearIndexesQuery, m[1])
	}
	return l.conn.QueryContext(ctx, query, args...)
}

func (l linearIndexes) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return l.conn.ExecContext(ctx, query, args...)
}

// tableNames lists the tables of the database behind conn that Atlas's
// inspector lists (its own filter: SQLite's and libSQL's internal tables
// aside), in the order the schema table holds them.
func tableNames(ctx context.Context, conn *sql.DB) ([]string, error) {
	rows, err := conn.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'libsql_%'`)
	if err != nil {
		return nil, fmt.Errorf("migration: list tables: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("migration: list tables: %w", err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("migration: list tables: %w", err)
	}
	return slices.Clip(out), nil
}
