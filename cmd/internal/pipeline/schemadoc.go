package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"ariga.io/atlas/sql/migrate"
	"ariga.io/atlas/sql/schema"
	"ariga.io/atlas/sql/sqlclient"
	"ariga.io/atlas/sql/sqlite"

	"github.com/securemsg/storage/internal/migration"
	schemafiles "github.com/securemsg/storage/schema"
)

// objectNotes is what the migration files say about the objects they
// create: the comments above each statement, by the name of the table or
// index it created, and the file header comments.
type objectNotes struct {
	order    []string            // tables, in the order they were created
	comments map[string][]string // table or index name -> comment lines
	headers  []string            // file header comment lines
}

// readNotes replays files, oldest first, on a private dev database
// (Replay) and attributes each statement's comments (as Atlas's
// lexer attaches them) to what the statement created, found by diffing
// Atlas's inspection before and after it.
func readNotes(ctx context.Context, files []migrate.File) (*objectNotes, error) {
	notes := &objectNotes{comments: map[string][]string{}}
	err := Replay(ctx, files, func(_ context.Context, _ *sqlclient.Client, rf *ReplayedFile) error {
		stmts := make([]*migrate.Stmt, len(rf.Statements))
		for i, s := range rf.Statements {
			stmts[i] = s.Stmt
		}
		notes.headers = append(notes.headers, fileHeader(rf.File.Bytes(), stmts)...)
		for _, s := range rf.Statements {
			for _, name := range created(s.Changes) {
				if _, ok := notes.comments[name]; !ok {
					if t, ok := s.After.Schemas[0].Table(name); ok && t != nil {
						notes.order = append(notes.order, name)
					}
				}
				notes.comments[name] = commentLines(s.Stmt.Comments)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return notes, nil
}

// created returns the names of the tables and indexes changes add.
func created(changes schema.Changes) []string {
	var out []string
	for _, c := range changes {
		switch c := c.(type) {
		case *schema.AddTable:
			out = append(out, c.T.Name)
		case *schema.ModifyTable:
			for _, tc := range c.Changes {
				if ai, ok := tc.(*schema.AddIndex); ok {
					out = append(out, ai.I.Name)
				}
			}
		}
	}
	return out
}

// fileHeader returns a file's leading comment block when Atlas attached
// it to no statement (a blank line separates it from the first one).
func fileHeader(b []byte, stmts []*migrate.Stmt) []string {
	var block []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			break
		}
		block = append(block, l+"\n")
	}
	if len(block) == 0 || (len(stmts) > 0 && slices.Equal(stmts[0].Comments, block)) {
		return nil
	}
	return commentLines(block)
}

// commentLines strips the "--" of SQL comment lines.
func commentLines(comments []string) []string {
	var out []string
	for _, c := range comments {
		for _, l := range strings.Split(strings.TrimRight(c, "\n"), "\n") {
			out = append(out, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "--")))
		}
	}
	return out
}

// The two sentences the migrations use to say a column holds a sealed
// record: a directory-wide rule in a file header, and a column named in
// its table's comment.
var (
	sealedByNameRE = regexp.MustCompile(`[Ee]very column named "([A-Za-z_][A-Za-z0-9_]*)" holds a sealed record`)
	sealedColumnRE = regexp.MustCompile(`\b([a-z_][a-z0-9_]*) is a sealed\b`)
	// wordBoundaryFor matches name as a whole word (a column named in a
	// CHECK or index expression).
	wordBoundaryFor = func(name string) *regexp.Regexp { return regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`) }
)

// sealedColumns returns, per table, the columns the comments declare
// sealed.
func (n *objectNotes) sealedColumns(t *schema.Table) map[string]bool {
	out := map[string]bool{}
	for _, m := range sealedByNameRE.FindAllStringSubmatch(strings.Join(n.headers, " "), -1) {
		if _, ok := t.Column(m[1]); ok {
			out[m[1]] = true
		}
	}
	for _, m := range sealedColumnRE.FindAllStringSubmatch(strings.Join(n.comments[t.Name], " "), -1) {
		if _, ok := t.Column(m[1]); ok {
			out[m[1]] = true
		}
	}
	return out
}

// SchemaDoc renders the schema reference of m's head (schema/SCHEMA.md,
// which cmd/migrate schema-doc writes): Atlas's inspection of a database
// migrated to head, described with the migrations' own comments. It
// returns an error if the directory does not replay or inspect.
func SchemaDoc(ctx context.Context, m *migration.Migrator) ([]byte, error) {
	files, err := m.Dir().Files()
	if err != nil {
		return nil, err
	}
	files = append(files, migrate.NewLocalFile("schema_revision.sql", []byte(schemafiles.RevisionTable())))
	notes, err := readNotes(ctx, files)
	if err != nil {
		return nil, err
	}
	conn, err := OpenHead(ctx, m)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	drv, err := sqlite.Open(conn)
	if err != nil {
		return nil, err
	}
	realm, err := drv.InspectRealm(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("inspect head: %w", err)
	}
	if len(realm.Schemas) != 1 {
		return nil, fmt.Errorf("inspect head: %d schemas, want 1", len(realm.Schemas))
	}
	s := realm.Schemas[0]

	var b bytes.Buffer
	fmt.Fprintf(&b, "# Schema reference (version %s)\n\n", m.Head())
	fmt.Fprintln(&b, "<!-- Generated by `go -C cmd run ./migrate schema-doc`: do not edit. CI regenerates it and fails on any difference. -->")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "Every table, column, index and foreign key of a database migrated to head, as")
	fmt.Fprintln(&b, "Atlas inspects it. The descriptions are the comments written above each")
	fmt.Fprintln(&b, "statement in `schema/migrations/` (and `schema/history/`), so nothing here is")
	fmt.Fprintln(&b, "maintained twice. **sealed** marks a column holding a sealed record (package")
	fmt.Fprintln(&b, "`seal`), as those comments declare it: a file header saying")
	fmt.Fprintln(&b, "`Every column named \"x\" holds a sealed record`, or a table's comment saying")
	fmt.Fprintln(&b, "`x is a sealed ...`.")
	fmt.Fprintln(&b)
	order := slices.Clone(notes.order)
	for _, t := range s.Tables {
		if !slices.Contains(order, t.Name) {
			order = append(order, t.Name)
		}
	}
	fmt.Fprintln(&b, "| table | columns | sealed columns |")
	fmt.Fprintln(&b, "| --- | --- | --- |")
	for _, name := range order {
		t, ok := s.Table(name)
		if !ok {
			continue
		}
		sealed := notes.sealedColumns(t)
		var sc []string
		for _, c := range t.Columns {
			if sealed[c.Name] {
				sc = append(sc, "`"+c.Name+"`")
			}
		}
		fmt.Fprintf(&b, "| [`%s`](#%s) | %d | %s |\n", t.Name, t.Name, len(t.Columns), noneIfEmpty(strings.Join(sc, ", ")))
	}
	for _, name := range order {
		t, ok := s.Table(name)
		if !ok {
			continue
		}
		writeTable(&b, t, notes)
	}
	return b.Bytes(), nil
}

func writeTable(b *bytes.Buffer, t *schema.Table, notes *objectNotes) {
	fmt.Fprintf(b, "\n## %s\n\n", t.Name)
	if c := notes.comments[t.Name]; len(c) > 0 {
		fmt.Fprintf(b, "%s\n\n", strings.Join(c, "\n"))
	}
	sealed := notes.sealedColumns(t)
	var checks []*schema.Check
	for _, a := range t.Attrs {
		if c, ok := a.(*schema.Check); ok {
			checks = append(checks, c)
		}
	}
	pk := map[string]bool{}
	if t.PrimaryKey != nil {
		for _, p := range t.PrimaryKey.Parts {
			if p.C != nil {
				pk[p.C.Name] = true
			}
		}
	}
	fmt.Fprintln(b, "| column | type | null | default | checks | sealed |")
	fmt.Fprintln(b, "| --- | --- | --- | --- | --- | --- |")
	for _, c := range t.Columns {
		typ := c.Type.Raw
		if pk[c.Name] {
			typ += " (primary key"
			if hasAutoIncrement(t, c) {
				typ += ", AUTOINCREMENT"
			}
			typ += ")"
		}
		null := "NOT NULL"
		if c.Type.Null {
			null = "NULL"
		}
		var cc []string
		for _, ch := range checks {
			if wordBoundaryFor(c.Name).MatchString(ch.Expr) {
				cc = append(cc, "`"+cell(ch.Expr)+"`")
			}
		}
		for _, a := range c.Attrs {
			if ch, ok := a.(*schema.Check); ok {
				cc = append(cc, "`"+cell(ch.Expr)+"`")
			}
		}
		seal := ""
		if sealed[c.Name] {
			seal = "**sealed**"
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s | %s | %s |\n", c.Name, typ, null, cell(defaultText(c.Default)), strings.Join(cc, " "), seal)
	}
	if t.PrimaryKey != nil {
		fmt.Fprintf(b, "\nPrimary key: (%s).\n", partList(t.PrimaryKey.Parts))
	}
	fmt.Fprintln(b)
	if len(t.Indexes) == 0 {
		fmt.Fprintln(b, "Indexes: none.")
	} else {
		fmt.Fprintln(b, "| index | unique | columns | partial | why |")
		fmt.Fprintln(b, "| --- | --- | --- | --- | --- |")
		for _, idx := range t.Indexes {
			unique := "no"
			if idx.Unique {
				unique = "yes"
			}
			where, why := "", strings.Join(notes.comments[idx.Name], " ")
			for _, a := range idx.Attrs {
				switch a := a.(type) {
				case *sqlite.IndexPredicate:
					where = "`WHERE " + cell(a.P) + "`"
				case *sqlite.IndexOrigin:
					if a.O == "u" && why == "" {
						why = "SQLite's index for the table's UNIQUE constraint"
					}
				}
			}
			fmt.Fprintf(b, "| `%s` | %s | (%s) | %s | %s |\n", idx.Name, unique, partList(idx.Parts), where, cell(why))
		}
	}
	fmt.Fprintln(b)
	if len(t.ForeignKeys) == 0 {
		fmt.Fprintln(b, "Foreign keys: none.")
	} else {
		fmt.Fprintln(b, "| foreign key | columns | references | on delete | on update |")
		fmt.Fprintln(b, "| --- | --- | --- | --- | --- |")
		for _, fk := range t.ForeignKeys {
			fmt.Fprintf(b, "| `%s` | (%s) | `%s` (%s) | %s | %s |\n", fk.Symbol, columnList(fk.Columns),
				fk.RefTable.Name, columnList(fk.RefColumns), noneIfEmpty(string(fk.OnDelete)), noneIfEmpty(string(fk.OnUpdate)))
		}
	}
}

func hasAutoIncrement(t *schema.Table, c *schema.Column) bool {
	for _, attrs := range [][]schema.Attr{t.Attrs, c.Attrs} {
		for _, a := range attrs {
			if _, ok := a.(*sqlite.AutoIncrement); ok {
				return true
			}
		}
	}
	return false
}

func defaultText(e schema.Expr) string {
	switch e := e.(type) {
	case nil:
		return ""
	case *schema.Literal:
		return "`" + e.V + "`"
	case *schema.RawExpr:
		return "`" + e.X + "`"
	default:
		return fmt.Sprintf("%v", e)
	}
}

func partList(parts []*schema.IndexPart) string {
	var out []string
	for _, p := range parts {
		s := "expression"
		switch {
		case p.C != nil:
			s = "`" + p.C.Name + "`"
		case p.X != nil:
			if r, ok := p.X.(*schema.RawExpr); ok {
				s = "`" + cell(r.X) + "`"
			}
		}
		if p.Desc {
			s += " DESC"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

func columnList(cols []*schema.Column) string {
	var out []string
	for _, c := range cols {
		out = append(out, "`"+c.Name+"`")
	}
	return strings.Join(out, ", ")
}

// cell makes s safe inside a Markdown table cell.
func cell(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
}

func noneIfEmpty(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
