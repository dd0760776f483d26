package pipeline

import (
	"fmt"
	"strings"

	"ariga.io/atlas/sql/schema"
	"ariga.io/atlas/sql/sqlite"
)

// Where a Difference is.
const (
	// InDatabase: in the database, not at head.
	InDatabase = "database"
	// AtHead: at head, missing from the database.
	AtHead = "head"
	// InBoth: in both, defined differently.
	InBoth = "both"
)

// Difference is one difference between a database's schema and head, in
// words: what differs (a table, column, index, check, foreign key, view or
// trigger), its table and name, and where it is.
type Difference struct {
	// Kind is "table", "column", "primary_key", "index", "check",
	// "foreign_key", "table_option", "view" or "trigger".
	Kind string `json:"kind"`
	// Table is the table it belongs to ("" for a table itself).
	Table string `json:"table,omitempty"`
	// Name names it ("" for an unnamed check or foreign key).
	Name string `json:"name,omitempty"`
	// Where is InDatabase, AtHead or InBoth.
	Where string `json:"where"`
	// Database and Head say how it is defined on each side, where that
	// tells the difference (a column's type, a check's expression, an
	// index's columns).
	Database string `json:"database,omitempty"`
	Head     string `json:"head,omitempty"`
}

// String describes the difference in one line, as drift prints it: for
// example "table pending_outbound_message: column extra is in the
// database, not at head: TEXT".
func (d Difference) String() string {
	what := strings.ReplaceAll(d.Kind, "_", " ")
	if d.Name != "" {
		what += " " + d.Name
	}
	var s string
	switch d.Where {
	case InDatabase:
		s = what + " is in the database, not at head"
	case AtHead:
		s = what + " is at head, missing from the database"
	default:
		s = what + " differs"
	}
	if d.Table != "" {
		s = "table " + d.Table + ": " + s
	}
	switch {
	case d.Where == InBoth:
		s += fmt.Sprintf(": database %s, head %s", orNone(d.Database), orNone(d.Head))
	case d.Database != "":
		s += ": " + d.Database
	case d.Head != "":
		s += ": " + d.Head
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// describeChanges puts in words the changes that bring a database's
// schema to head (sqlite.DefaultDiff.RealmDiff(database, head)).
func describeChanges(changes schema.Changes) []Difference {
	var out []Difference
	for _, c := range changes {
		switch c := c.(type) {
		case *schema.AddTable:
			out = append(out, Difference{Kind: "table", Name: c.T.Name, Where: AtHead})
		case *schema.DropTable:
			out = append(out, Difference{Kind: "table", Name: c.T.Name, Where: InDatabase})
		case *schema.ModifyTable:
			out = append(out, describeTable(c.T.Name, c.Changes)...)
		case *schema.ModifySchema:
			out = append(out, describeChanges(c.Changes)...)
		default:
			out = append(out, Difference{Kind: "schema", Where: InBoth, Database: fmt.Sprintf("%T", c)})
		}
	}
	return out
}

// describeTable puts in words the changes of one table.
func describeTable(table string, changes schema.Changes) []Difference {
	var out []Difference
	add := func(d Difference) {
		d.Table = table
		out = append(out, d)
	}
	for _, c := range changes {
		switch c := c.(type) {
		case *schema.AddColumn:
			add(Difference{Kind: "column", Name: c.C.Name, Where: AtHead, Head: columnType(c.C)})
		case *schema.DropColumn:
			add(Difference{Kind: "column", Name: c.C.Name, Where: InDatabase, Database: columnType(c.C)})
		case *schema.ModifyColumn:
			add(Difference{Kind: "column", Name: c.To.Name, Where: InBoth, Database: columnDef(c.From), Head: columnDef(c.To)})
		case *schema.AddIndex:
			add(Difference{Kind: indexKind(c.I), Name: c.I.Name, Where: AtHead, Head: indexDef(c.I)})
		case *schema.DropIndex:
			add(Difference{Kind: indexKind(c.I), Name: c.I.Name, Where: InDatabase, Database: indexDef(c.I)})
		case *schema.ModifyIndex:
			add(Difference{Kind: indexKind(c.To), Name: c.To.Name, Where: InBoth, Database: indexDef(c.From), Head: indexDef(c.To)})
		case *schema.AddPrimaryKey:
			add(Difference{Kind: "primary_key", Where: AtHead, Head: indexColumns(c.P)})
		case *schema.DropPrimaryKey:
			add(Difference{Kind: "primary_key", Where: InDatabase, Database: indexColumns(c.P)})
		case *schema.ModifyPrimaryKey:
			add(Difference{Kind: "primary_key", Where: InBoth, Database: indexColumns(c.From), Head: indexColumns(c.To)})
		case *schema.AddCheck:
			add(Difference{Kind: "check", Name: c.C.Name, Where: AtHead, Head: checkDef(c.C)})
		case *schema.DropCheck:
			add(Difference{Kind: "check", Name: c.C.Name, Where: InDatabase, Database: checkDef(c.C)})
		case *schema.ModifyCheck:
			add(Difference{Kind: "check", Name: c.To.Name, Where: InBoth, Database: checkDef(c.From), Head: checkDef(c.To)})
		case *schema.AddForeignKey:
			add(Difference{Kind: "foreign_key", Name: c.F.Symbol, Where: AtHead, Head: fkKey(c.F)})
		case *schema.DropForeignKey:
			add(Difference{Kind: "foreign_key", Name: c.F.Symbol, Where: InDatabase, Database: fkKey(c.F)})
		case *schema.ModifyForeignKey:
			add(Difference{Kind: "foreign_key", Name: c.To.Symbol, Where: InBoth, Database: fkKey(c.From), Head: fkKey(c.To)})
		case *schema.AddAttr:
			add(Difference{Kind: "table_option", Where: AtHead, Head: attrDef(c.A)})
		case *schema.DropAttr:
			add(Difference{Kind: "table_option", Where: InDatabase, Database: attrDef(c.A)})
		case *schema.ModifyAttr:
			add(Difference{Kind: "table_option", Where: InBoth, Database: attrDef(c.From), Head: attrDef(c.To)})
		default:
			add(Difference{Kind: "table_option", Where: InBoth, Database: fmt.Sprintf("%T", c)})
		}
	}
	return out
}

func indexKind(idx *schema.Index) string {
	if idx.Unique {
		return "unique_index"
	}
	return "index"
}

// indexDef describes an index by its columns and predicate.
func indexDef(idx *schema.Index) string {
	s := "(" + indexColumns(idx) + ")"
	for _, a := range idx.Attrs {
		if p, ok := a.(*sqlite.IndexPredicate); ok {
			s += " WHERE " + oneLine(p.P)
		}
	}
	return s
}

// checkDef describes a check by its expression (checkExpr).
func checkDef(c *schema.Check) string {
	return "CHECK (" + checkExpr(c) + ")"
}

// checkExpr returns a check's expression with its whitespace runs as
// single spaces and without the parentheses around the whole: two
// spellings of one constraint compare equal.
func checkExpr(c *schema.Check) string {
	return trimParens(oneLine(c.Expr))
}

// columnDef describes a column's type, nullability and default.
func columnDef(c *schema.Column) string {
	s := columnType(c)
	if c.Default != nil {
		if r, ok := c.Default.(*schema.RawExpr); ok {
			s += " DEFAULT " + r.X
		} else if l, ok := c.Default.(*schema.Literal); ok {
			s += " DEFAULT " + l.V
		}
	}
	return s
}

func attrDef(a schema.Attr) string {
	return strings.TrimPrefix(fmt.Sprintf("%T", a), "*")
}
