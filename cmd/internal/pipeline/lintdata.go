package pipeline

import (
	"context"
	"fmt"
	"regexp"

	"ariga.io/atlas/sql/sqlcheck"
)

// WholeTable is a lint analyzer for a statement that changes every row of
// a table: a DELETE or an UPDATE without WHERE. Atlas's analyzers judge
// schema changes and say nothing of either. A DELETE without WHERE loses
// every row, as a dropped table does: a blocking finding, unless an
// atlas:nolint directive accepts it. An UPDATE without WHERE is how a
// migration backfills a column: reported for the reviewer, not blocking,
// since fixture-test refuses it unless the migration declares what it
// writes (NN_description.expect.json).
type WholeTable struct{}

// Diagnostic codes of WholeTable.
const (
	CodeDeleteAll = "WT101" // DELETE without WHERE
	CodeUpdateAll = "WT102" // UPDATE without WHERE
)

// informational says why a finding of a code is not blocking.
var informational = map[string]string{
	CodeUpdateAll: "an UPDATE of every row is a backfill: fixture-test requires its declaration",
}

// Name returns "wholetable".
func (WholeTable) Name() string { return "wholetable" }

var (
	deleteAllRE = regexp.MustCompile(`(?is)^\s*DELETE\s+FROM\s+(?:` + ident + `\s*\.\s*)?` + ident)
	updateAllRE = regexp.MustCompile(`(?is)^\s*UPDATE\s+(?:OR\s+[A-Z]+\s+)?(?:` + ident + `\s*\.\s*)?` + ident + `\s+SET\b`)
	// sqlStringRE matches a string literal, whose text is no keyword.
	sqlStringRE = regexp.MustCompile(`'(?:[^']|'')*'`)
)

// Analyze reports each DELETE and UPDATE of the file that has no WHERE,
// at the statement.
func (WholeTable) Analyze(_ context.Context, p *sqlcheck.Pass) error {
	stmts, err := p.File.File.StmtDecls()
	if err != nil {
		return fmt.Errorf("read statements: %w", err)
	}
	var diags []sqlcheck.Diagnostic
	for _, s := range stmts {
		if whereRE.MatchString(sqlStringRE.ReplaceAllString(s.Text, "''")) {
			continue
		}
		if m := deleteAllRE.FindStringSubmatch(s.Text); m != nil {
			diags = append(diags, sqlcheck.Diagnostic{Pos: s.Pos, Code: CodeDeleteAll,
				Text: fmt.Sprintf("DELETE without WHERE removes every row of table %q", unquote(m[2]))})
		}
		if m := updateAllRE.FindStringSubmatch(s.Text); m != nil {
			diags = append(diags, sqlcheck.Diagnostic{Pos: s.Pos, Code: CodeUpdateAll,
				Text: fmt.Sprintf("UPDATE without WHERE changes every row of table %q", unquote(m[2]))})
		}
	}
	if len(diags) > 0 {
		p.Reporter.WriteReport(sqlcheck.Report{Text: "whole-table changes", Diagnostics: diags})
	}
	return nil
}
