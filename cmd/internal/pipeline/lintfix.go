package pipeline

import (
	"regexp"
	"slices"
	"strings"

	"ariga.io/atlas/sql/migrate"
	"ariga.io/atlas/sql/schema"
	"ariga.io/atlas/sql/sqlcheck"
)

// Diffing inspected schemas cannot tell a rename from a drop followed by an
// add. The Atlas CLI fixes that up with its SQL parser (not part of the Go
// module); the two SQLite forms are recognised here from the statement
// text, so that the incompatible analyzer sees renames and the destructive
// one does not report them as drops.

const ident = `("[^"]+"|` + "`[^`]+`" + `|\[[^\]]+\]|[A-Za-z_][A-Za-z0-9_$]*)`

var (
	renameTableRE  = regexp.MustCompile(`(?is)^\s*ALTER\s+TABLE\s+(?:` + ident + `\s*\.\s*)?` + ident + `\s+RENAME\s+TO\s+` + ident + `\s*;?\s*$`)
	renameColumnRE = regexp.MustCompile(`(?is)^\s*ALTER\s+TABLE\s+(?:` + ident + `\s*\.\s*)?` + ident + `\s+RENAME\s+(?:COLUMN\s+)?` + ident + `\s+TO\s+` + ident + `\s*;?\s*$`)
)

func unquote(s string) string {
	if len(s) >= 2 {
		switch s[0] {
		case '"', '`', '[':
			return s[1 : len(s)-1]
		}
	}
	return s
}

// fixRenames rewrites the changes of one statement: a table rename seen as
// DropTable + AddTable becomes a RenameTable, a column rename seen as
// DropColumn + AddColumn becomes a RenameColumn.
func fixRenames(stmt *migrate.Stmt, changes schema.Changes) schema.Changes {
	if m := renameTableRE.FindStringSubmatch(stmt.Text); m != nil {
		from, to := unquote(m[2]), unquote(m[3])
		d := slices.IndexFunc(changes, func(c schema.Change) bool { return isDropT(c, from) })
		a := slices.IndexFunc(changes, func(c schema.Change) bool { return isAddT(c, to) })
		if d != -1 && a != -1 {
			out := slices.Clone(changes)
			out[d] = &schema.RenameTable{From: changes[d].(*schema.DropTable).T, To: changes[a].(*schema.AddTable).T}
			return slices.Delete(out, a, a+1)
		}
		return changes
	}
	if m := renameColumnRE.FindStringSubmatch(stmt.Text); m != nil {
		table, from, to := unquote(m[2]), unquote(m[3]), unquote(m[4])
		for _, c := range changes {
			mt, ok := c.(*schema.ModifyTable)
			if !ok || mt.T.Name != table {
				continue
			}
			d := slices.IndexFunc(mt.Changes, func(c schema.Change) bool {
				dc, ok := c.(*schema.DropColumn)
				return ok && dc.C.Name == from
			})
			a := slices.IndexFunc(mt.Changes, func(c schema.Change) bool {
				ac, ok := c.(*schema.AddColumn)
				return ok && ac.C.Name == to
			})
			if d != -1 && a != -1 {
				rc := &schema.RenameColumn{From: mt.Changes[d].(*schema.DropColumn).C, To: mt.Changes[a].(*schema.AddColumn).C}
				mt.Changes[d] = rc
				mt.Changes = slices.Delete(mt.Changes, a, a+1)
			}
		}
	}
	return changes
}

// foldRebuilds recognises SQLite's documented way of changing a table
// (https://www.sqlite.org/lang_altertable.html#otheralter): CREATE TABLE
// new_T, copy the rows, DROP TABLE T, ALTER TABLE new_T RENAME TO T. The
// four statements become one ModifyTable of T, so that the analyzers judge
// what actually changed (a dropped column, say) rather than reporting the
// DROP TABLE of a table that is immediately put back. Atlas's own migrate
// lint does not fold them: it reports the DROP TABLE (DS102), which an
// atlas:nolint DS102 directive above it accepts in both.
func foldRebuilds(drv migrate.Driver, changes []*sqlcheck.Change) []*sqlcheck.Change {
	var out []*sqlcheck.Change
	for i := 0; i < len(changes); i++ {
		if i+3 < len(changes) {
			if from, to, ok := rebuild(changes[i], changes[i+2], changes[i+3]); ok {
				if diff, err := drv.TableDiff(from, to); err == nil {
					out = append(out, &sqlcheck.Change{
						Stmt: &migrate.Stmt{
							Pos: changes[i].Stmt.Pos,
							Text: strings.Join([]string{
								changes[i].Stmt.Text, changes[i+1].Stmt.Text,
								changes[i+2].Stmt.Text, changes[i+3].Stmt.Text,
							}, "\n"),
							// The four statements' comments, so that a
							// directive above any of them applies.
							Comments: slices.Concat(changes[i].Stmt.Comments, changes[i+1].Stmt.Comments,
								changes[i+2].Stmt.Comments, changes[i+3].Stmt.Comments),
						},
						Changes: schema.Changes{&schema.ModifyTable{T: to, Changes: diff}},
					})
					i += 3
					continue
				}
			}
		}
		out = append(out, changes[i])
	}
	return out
}

// rebuild reports whether create, drop and rename are the CREATE new_T,
// DROP T and RENAME new_T TO T of a table rebuild, and returns T before and
// after.
func rebuild(create, drop, rename *sqlcheck.Change) (from, to *schema.Table, ok bool) {
	if len(create.Changes) != 1 || len(drop.Changes) != 1 || len(rename.Changes) != 1 {
		return nil, nil, false
	}
	add, ok1 := create.Changes[0].(*schema.AddTable)
	dt, ok2 := drop.Changes[0].(*schema.DropTable)
	rt, ok3 := rename.Changes[0].(*schema.RenameTable)
	if !ok1 || !ok2 || !ok3 || !strings.HasPrefix(add.T.Name, "new_") {
		return nil, nil, false
	}
	name := strings.TrimPrefix(add.T.Name, "new_")
	if dt.T.Name != name || rt.From.Name != add.T.Name || rt.To.Name != name {
		return nil, nil, false
	}
	return dt.T, rt.To, true
}

func isDropT(c schema.Change, name string) bool {
	d, ok := c.(*schema.DropTable)
	return ok && d.T.Name == name
}

func isAddT(c schema.Change, name string) bool {
	a, ok := c.(*schema.AddTable)
	return ok && a.T.Name == name
}
