package migration

// A schema object's definition, as a database holds it: the facts its
// stored SQL states (sqltext.go) and those SQLite reports for it through
// its pragmas, which see what the text alone may hide (a generated or
// hidden column, a type that reads as a constraint, an index's
// collations and key columns).

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
)

// objectDef is one object of a schema and its definition.
type objectDef struct {
	Object
	// text is its stored SQL as SQLite keeps it, "" for an index SQLite
	// made for a constraint.
	text string
	// sql are the facts of its stored SQL (sqlFacts); none for an index
	// SQLite made for a UNIQUE or PRIMARY KEY constraint.
	sql map[string]string
	// pragma are the facts SQLite reports: a table's columns
	// (pragma_table_xinfo, hidden ones included), foreign keys
	// (pragma_foreign_key_list) and indexes (pragma_index_list); an
	// index's columns (pragma_index_xinfo).
	pragma map[string]string
	// asked says whether pragma was read: SQLite is not asked about an
	// object whose stored SQL already differs.
	asked bool
	// root is the root page of its b-tree as sqlite_master records it
	// (0 for a view or trigger; as read, for a writer may store any value).
	root any
}

// differences lists how got departs from d, one line per fact: the facts
// of the stored SQL, or, when those all agree, SQLite's own.
func (d *objectDef) differences(got *objectDef) []string {
	var out []string
	if !equalFoldASCII(d.Table, got.Table) {
		out = append(out, fmt.Sprintf("on table %s (defined: on %s)", Escape(got.Table), Escape(d.Table)))
	}
	if diff := factDifferences(d.sql, got.sql); len(diff) > 0 || !got.asked {
		return append(out, diff...)
	}
	return append(out, factDifferences(d.pragma, got.pragma)...)
}

// factDifferences lists the facts of got that are not those of want, in
// the order of their keys.
func factDifferences(want, got map[string]string) []string {
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out []string
	for _, k := range sorted {
		w, inWant := want[k]
		g, inGot := got[k]
		switch {
		case inWant && inGot && w == g:
		case inWant && inGot:
			out = append(out, fmt.Sprintf("%s: %s (defined: %s)", Escape(k), Escape(orNone(g)), Escape(orNone(w))))
		case inGot:
			out = append(out, fmt.Sprintf("%s: %s (not defined)", Escape(k), Escape(orNone(g))))
		default:
			out = append(out, fmt.Sprintf("%s: missing (defined: %s)", Escape(k), Escape(orNone(w))))
		}
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// querier is what the schema is read through: a transaction on the
// database checked, or the in-memory database the migrations replay into.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// The introspection queries: sqlite_master and SQLite's table-valued
// pragma functions, joined so that one query reads a pragma for every
// object named (ASCII lowercased, as SQLite's lower does) by the parameters that replace %s, one "?"
// each. sqlc cannot type the pragma functions, so these stay here beside
// the code that reads them.
const (
	schemaQuery = `SELECT type, name, tbl_name, sql, rootpage FROM sqlite_master`
	// Columns of every table named, generated and hidden ones included.
	tableXInfoQuery = `SELECT m.name, x.cid, x.name, x.type, x."notnull", x.dflt_value, x.pk, x.hidden
		FROM sqlite_master AS m, pragma_table_xinfo(m.name) AS x
		WHERE m.type = 'table' AND lower(m.name) IN %s`
	foreignKeyQuery = `SELECT m.name, f.id, f.seq, f."table", f."from", f."to", f.on_update, f.on_delete, f."match"
		FROM sqlite_master AS m, pragma_foreign_key_list(m.name) AS f
		WHERE m.type = 'table' AND lower(m.name) IN %s`
	indexListQuery = `SELECT m.name, l.name, l."unique", l.origin, l.partial
		FROM sqlite_master AS m, pragma_index_list(m.name) AS l
		WHERE m.type = 'table' AND lower(m.name) IN %s`
	// Every column of every index named: key columns (with their
	// collation and order; cid -2 for an expression) and the rowid or
	// primary key columns a row is found by.
	indexXInfoQuery = `SELECT m.name, x.seqno, x.cid, x.name, x."desc", x.coll, x."key"
		FROM sqlite_master AS m, pragma_index_xinfo(m.name) AS x
		WHERE m.type = 'index' AND lower(m.name) IN %s`
)

// readSchema reads every object of the schema behind q, by type and
// name (key), with the facts of its stored SQL (taken from known when it
// holds that very text, which then need not be read again); and, for the
// objects deep selects (given them all, once read), SQLite's pragma
// facts. Objects not selected are not touched beyond sqlite_master: a
// planted virtual table of a module this build lacks, or a column of a
// collation it does not know, is reported from its text, and SQLite is
// not asked about it.
func readSchema(ctx context.Context, q querier, known map[string]map[string]string, deep func(d *objectDef, all map[objectKey]*objectDef) bool) (map[objectKey]*objectDef, error) {
	out := map[objectKey]*objectDef{}
	err := eachRow(ctx, q, schemaQuery, nil, func(scan func(...any) error) error {
		var o Object
		var text sql.NullString
		var root any
		if err := scan(&o.Type, &o.Name, &o.Table, &text, &root); err != nil {
			return err
		}
		d := &objectDef{Object: o, text: text.String, pragma: map[string]string{}, root: root}
		if text.Valid {
			if d.sql = known[o.Type+" "+text.String]; d.sql == nil {
				d.sql = sqlFacts(o.Type, text.String)
			}
		}
		out[key(o)] = d
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The pragmas are asked by name, for tables and indexes only: a
	// trigger or view named like one does not make SQLite read the
	// table's or index's facts.
	seen := map[string]bool{}
	var names []string
	for k, d := range out {
		if !deep(d, out) {
			continue
		}
		d.asked = true
		if (d.Type == "table" || d.Type == "index") && !seen[k.name] {
			seen[k.name] = true
			names = append(names, k.name)
		}
	}
	if len(names) == 0 {
		return out, nil
	}
	sort.Strings(names)
	marks := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(names)), ", ") + ")"
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = n
	}
	// A fact goes to the object of its pragma's type: a trigger of the
	// same name holds none.
	fact := func(typ, obj, k, format string, args ...any) {
		if d := out[key(Object{Type: typ, Name: obj})]; d != nil {
			d.pragma[k] = fmt.Sprintf(format, args...)
		}
	}
	err = eachRow(ctx, q, fmt.Sprintf(tableXInfoQuery, marks), args, func(scan func(...any) error) error {
		var tbl, name, typ string
		var cid, notNull, pk, hidden int64
		var dflt sql.NullString
		if err := scan(&tbl, &cid, &name, &typ, &notNull, &dflt, &pk, &hidden); err != nil {
			return err
		}
		def := "(none)"
		if dflt.Valid {
			def = render(tokenize(dflt.String))
		}
		fact("table", tbl, "column "+lowerASCII(name), "position %d, type %q, not null %d, default %s, primary key %d, hidden %d",
			cid, typ, notNull, def, pk, hidden)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = eachRow(ctx, q, fmt.Sprintf(foreignKeyQuery, marks), args, func(scan func(...any) error) error {
		var tbl, parent, from, onUpdate, onDelete, match string
		var to sql.NullString
		var id, seq int64
		if err := scan(&tbl, &id, &seq, &parent, &from, &to, &onUpdate, &onDelete, &match); err != nil {
			return err
		}
		fact("table", tbl, fmt.Sprintf("foreign key %d.%d", id, seq), "%s references %s(%s) on update %s on delete %s match %s",
			lowerASCII(from), lowerASCII(parent), lowerASCII(to.String), onUpdate, onDelete, match)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = eachRow(ctx, q, fmt.Sprintf(indexListQuery, marks), args, func(scan func(...any) error) error {
		var tbl, index, origin string
		var unique, partial int64
		if err := scan(&tbl, &index, &unique, &origin, &partial); err != nil {
			return err
		}
		fact("table", tbl, "index "+lowerASCII(index), "unique %d, origin %s, partial %d", unique, origin, partial)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = eachRow(ctx, q, fmt.Sprintf(indexXInfoQuery, marks), args, func(scan func(...any) error) error {
		var index, coll string
		var name sql.NullString
		var seq, cid, desc, isKey int64
		if err := scan(&index, &seq, &cid, &name, &desc, &coll, &isKey); err != nil {
			return err
		}
		fact("index", index, fmt.Sprintf("column %d", seq), "cid %d, name %s, desc %d, collation %s, key %d",
			cid, lowerASCII(name.String), desc, lowerASCII(coll), isKey)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachRow runs query with args and calls fn for every row.
func eachRow(ctx context.Context, q querier, query string, args []any, fn func(scan func(...any) error) error) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("migration: read schema: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows.Scan); err != nil {
			return fmt.Errorf("migration: read schema: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("migration: read schema: %w", err)
	}
	return nil
}
