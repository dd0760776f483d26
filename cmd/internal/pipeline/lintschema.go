package pipeline

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"ariga.io/atlas/sql/schema"
	"ariga.io/atlas/sql/sqlcheck"
	"ariga.io/atlas/sql/sqlite"
)

// SchemaLoss is a lint analyzer for what a table rebuild can lose without
// dropping a table or a column, which Atlas's analyzers do not report.
// SQLite changes a table by rebuilding it (create new_T, copy the rows,
// drop T, rename new_T to T); a table the file drops and that ends the
// file under the same name is rebuilt, and SchemaLoss reports each of its
// CHECK constraints, UNIQUE constraints, indexes and foreign keys that is
// gone (except those on a column that is gone: the destructive analyzer
// reports the column), and each column whose declared type changed. It
// also reports a copy of rows that selects only some of them (INSERT ...
// SELECT ... WHERE, or INSERT OR IGNORE ... SELECT) from a table the same
// file drops. It compares the schema before and after the whole file, so
// a constraint dropped and put back is not a finding. An index dropped on
// its own (DROP INDEX) is left to QueryPlans, which says whether a query
// loses by it.
type SchemaLoss struct{}

// Diagnostic codes of SchemaLoss.
const (
	CodeCheckLost      = "SL101" // a CHECK constraint is gone
	CodeUniqueLost     = "SL102" // a UNIQUE constraint or unique index is gone
	CodeIndexLost      = "SL103" // an index is gone
	CodeForeignKeyLost = "SL104" // a foreign key is gone
	CodeTypeChanged    = "SL105" // a column's declared type changed
	CodeRowsFiltered   = "SL106" // rows copied selectively from a dropped table
)

// Name returns "schemaloss".
func (SchemaLoss) Name() string { return "schemaloss" }

// Analyze reports, at the position of the statement that dropped or
// rebuilt the table (the file's first statement if none is found), every
// loss described on SchemaLoss.
func (SchemaLoss) Analyze(_ context.Context, p *sqlcheck.Pass) error {
	var diags []sqlcheck.Diagnostic
	dropped := droppedTables(p.File)
	for _, from := range tables(p.File.From) {
		to, ok := findTable(p.File.To, from.Name)
		if !ok || !dropped[from.Name] {
			continue // gone (the destructive analyzer's finding), or not rebuilt
		}
		pos := statementPos(p.File, from.Name)
		add := func(code, format string, args ...any) {
			diags = append(diags, sqlcheck.Diagnostic{Pos: pos, Code: code, Text: fmt.Sprintf(format, args...)})
		}
		// A constraint or index on a dropped column goes with it: the
		// destructive analyzer reports the column.
		kept := func(expr string) bool {
			for _, c := range from.Columns {
				if _, ok := to.Column(c.Name); !ok && wordBoundaryFor(c.Name).MatchString(expr) {
					return false
				}
			}
			return true
		}
		for _, c := range checks(from) {
			if !slices.Contains(checks(to), c) && kept(c) {
				add(CodeCheckLost, "table %q loses CHECK (%s)", from.Name, c)
			}
		}
		for _, idx := range from.Indexes {
			if !kept(indexColumns(idx)) || slices.ContainsFunc(to.Indexes, func(o *schema.Index) bool { return indexKey(o) == indexKey(idx) }) {
				continue
			}
			if idx.Unique {
				add(CodeUniqueLost, "table %q loses UNIQUE (%s)%s", from.Name, indexColumns(idx), namedIndex(idx))
			} else {
				add(CodeIndexLost, "table %q loses index %q on (%s)", from.Name, idx.Name, indexColumns(idx))
			}
		}
		for _, fk := range from.ForeignKeys {
			if !slices.ContainsFunc(to.ForeignKeys, func(o *schema.ForeignKey) bool { return fkKey(o) == fkKey(fk) }) {
				add(CodeForeignKeyLost, "table %q loses FOREIGN KEY %s", from.Name, fkKey(fk))
			}
		}
		for _, c := range from.Columns {
			n, ok := to.Column(c.Name)
			if ok && columnType(c) != columnType(n) {
				add(CodeTypeChanged, "column %q of table %q changes type from %s to %s", c.Name, from.Name, columnType(c), columnType(n))
			}
		}
	}
	diags = append(diags, filteredCopies(p.File)...)
	if len(diags) == 0 {
		return nil
	}
	p.Reporter.WriteReport(sqlcheck.Report{Text: "schema loss", Diagnostics: diags})
	return nil
}

var (
	insertSelectRE = regexp.MustCompile(`(?is)\bINSERT\s+(OR\s+IGNORE\s+)?INTO\b[^;]*?\bSELECT\b[^;]*?\bFROM\s+` + ident + `([^;]*)`)
	dropTableRE    = regexp.MustCompile(`(?is)\bDROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?` + ident)
	whereRE        = regexp.MustCompile(`(?i)\bWHERE\b`)
)

// filteredCopies reports each INSERT ... SELECT of the file that copies
// only some rows (a WHERE, or OR IGNORE) of a table the file drops, at the
// INSERT (the file's own statements: a folded rebuild's change stands at
// its CREATE TABLE).
func filteredCopies(f *sqlcheck.File) []sqlcheck.Diagnostic {
	dropped := droppedTables(f)
	stmts, err := f.File.StmtDecls()
	if err != nil {
		for _, c := range f.Changes {
			stmts = append(stmts, c.Stmt)
		}
	}
	var out []sqlcheck.Diagnostic
	for _, stmt := range stmts {
		for _, m := range insertSelectRE.FindAllStringSubmatch(stmt.Text, -1) {
			src := unquote(m[2])
			if !dropped[src] {
				continue
			}
			switch {
			case m[1] != "":
				out = append(out, sqlcheck.Diagnostic{Pos: stmt.Pos, Code: CodeRowsFiltered,
					Text: fmt.Sprintf("rows of %q are copied with INSERT OR IGNORE: a row the new table refuses is lost when %q is dropped", src, src)})
			case whereRE.MatchString(m[3]):
				out = append(out, sqlcheck.Diagnostic{Pos: stmt.Pos, Code: CodeRowsFiltered,
					Text: fmt.Sprintf("rows of %q are copied with a WHERE: the rows it does not select are lost when %q is dropped", src, src)})
			}
		}
	}
	return out
}

// droppedTables returns the tables a DROP TABLE statement of f names
// (also inside a folded rebuild, whose text holds its four statements).
func droppedTables(f *sqlcheck.File) map[string]bool {
	dropped := map[string]bool{}
	for _, c := range f.Changes {
		for _, m := range dropTableRE.FindAllStringSubmatch(c.Stmt.Text, -1) {
			dropped[unquote(m[1])] = true
		}
	}
	return dropped
}

// statementPos returns the position of the statement of f that drops or
// modifies table, or of its first statement.
func statementPos(f *sqlcheck.File, table string) int {
	for _, c := range f.Changes {
		for _, ch := range c.Changes {
			switch ch := ch.(type) {
			case *schema.DropTable:
				if ch.T.Name == table {
					return c.Stmt.Pos
				}
			case *schema.ModifyTable:
				if ch.T.Name == table {
					return c.Stmt.Pos
				}
			}
		}
	}
	if len(f.Changes) > 0 {
		return f.Changes[0].Stmt.Pos
	}
	return 0
}

func tables(r *schema.Realm) []*schema.Table {
	if r == nil {
		return nil
	}
	var out []*schema.Table
	for _, s := range r.Schemas {
		out = append(out, s.Tables...)
	}
	return out
}

func findTable(r *schema.Realm, name string) (*schema.Table, bool) {
	for _, t := range tables(r) {
		if t.Name == name {
			return t, true
		}
	}
	return nil, false
}

// checks returns a table's CHECK expressions, spaces normalised, without
// the parentheses around the whole.
func checks(t *schema.Table) []string {
	var out []string
	for _, a := range t.Attrs {
		if c, ok := a.(*schema.Check); ok {
			out = append(out, checkExpr(c))
		}
	}
	return out
}

// trimParens removes the parentheses around the whole of e.
func trimParens(e string) string {
	if strings.HasPrefix(e, "(") && strings.HasSuffix(e, ")") && balanced(e[1:len(e)-1]) {
		return e[1 : len(e)-1]
	}
	return e
}

// balanced reports whether no closing parenthesis of s comes before its
// opening one.
func balanced(s string) bool {
	depth := 0
	for _, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
			if depth < 0 {
				return false
			}
		}
	}
	return depth == 0
}

// indexKey identifies an index by what it enforces and serves, not by its
// name: SQLite names a UNIQUE constraint's index after the table it was
// created with, so a rebuilt table's is renamed.
func indexKey(idx *schema.Index) string {
	return fmt.Sprintf("unique=%t %s", idx.Unique, indexDef(idx))
}

func indexColumns(idx *schema.Index) string {
	parts := make([]string, len(idx.Parts))
	for i, p := range idx.Parts {
		switch {
		case p.C != nil:
			parts[i] = p.C.Name
		case p.X != nil:
			if r, ok := p.X.(*schema.RawExpr); ok {
				parts[i] = r.X
			} else {
				parts[i] = fmt.Sprint(p.X)
			}
		}
		if p.Desc {
			parts[i] += " DESC"
		}
	}
	return strings.Join(parts, ", ")
}

// namedIndex names a unique index created with CREATE UNIQUE INDEX; a
// UNIQUE constraint's index has no name of its own.
func namedIndex(idx *schema.Index) string {
	for _, a := range idx.Attrs {
		if o, ok := a.(*sqlite.IndexOrigin); ok && o.O != "c" {
			return ""
		}
	}
	return fmt.Sprintf(" (index %q)", idx.Name)
}

func fkKey(fk *schema.ForeignKey) string {
	cols := func(cs []*schema.Column) string {
		n := make([]string, len(cs))
		for i, c := range cs {
			n[i] = c.Name
		}
		return strings.Join(n, ", ")
	}
	ref := ""
	if fk.RefTable != nil {
		ref = fk.RefTable.Name
	}
	return fmt.Sprintf("(%s) REFERENCES %s (%s) ON DELETE %s ON UPDATE %s", cols(fk.Columns), ref, cols(fk.RefColumns), fk.OnDelete, fk.OnUpdate)
}

func columnType(c *schema.Column) string {
	if c.Type == nil {
		return "(none)"
	}
	t := strings.ToUpper(strings.Join(strings.Fields(c.Type.Raw), " "))
	if t == "" {
		t = strings.ToUpper(fmt.Sprint(c.Type.Type))
	}
	if !c.Type.Null {
		t += " NOT NULL"
	}
	return t
}
