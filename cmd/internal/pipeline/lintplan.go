package pipeline

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"ariga.io/atlas/sql/sqlcheck"
)

// QueryPlans is a lint analyzer none of the usual migration linters has:
// it plans every query of the application (Queries) on the schema before
// and after each migration file and reports a query whose plan gets
// worse: it no longer prepares (a table or column it reads is gone), it
// scans a table it searched before, it sorts in a temporary b-tree where
// it did not, or it no longer uses an index the file dropped. Each
// finding names the query and both plans.
//
// The plans are SQLite's EXPLAIN QUERY PLAN on the replay's empty
// database, without statistics: what the schema allows, not what a
// populated database's statistics would choose (queries/PLANS.md shows
// those). A QueryPlans remembers the plans of the last file it analyzed,
// so one value must see the files of one directory in order, oldest
// first, as lint runs them; the first file only records plans.
type QueryPlans struct {
	// Queries are the queries to plan (ReadQueries).
	Queries []Query

	before map[string]queryPlan // by query name, after the previous file
}

// CodePlanWorse is the diagnostic code of a QueryPlans finding.
const CodePlanWorse = "QP101"

// queryPlan is a query's plan on one schema, or why it does not prepare.
type queryPlan struct {
	lines []string
	err   error
}

// Name returns "queryplans".
func (*QueryPlans) Name() string { return "queryplans" }

var (
	scanRE  = regexp.MustCompile(`^SCAN (\S+)`)
	indexRE = regexp.MustCompile(`USING (?:COVERING )?INDEX (\S+)`)
)

// Analyze plans every query on pass.Dev (the schema after the file) and
// reports each one worse than after the previous file.
func (a *QueryPlans) Analyze(ctx context.Context, p *sqlcheck.Pass) error {
	after := make(map[string]queryPlan, len(a.Queries))
	for _, q := range a.Queries {
		lines, err := Explain(ctx, p.Dev.DB, q.SQL)
		for i := range lines {
			lines[i] = strings.TrimSpace(lines[i])
		}
		after[q.Name] = queryPlan{lines: lines, err: err}
	}
	before := a.before
	a.before = after
	if before == nil {
		return nil
	}
	indexes, err := indexNames(ctx, p.Dev.DB)
	if err != nil {
		return err
	}
	pos := 0
	if len(p.File.Changes) > 0 {
		pos = p.File.Changes[0].Stmt.Pos
	}
	var diags []sqlcheck.Diagnostic
	for _, q := range a.Queries {
		b, n := before[q.Name], after[q.Name]
		if b.err != nil {
			continue // the query did not prepare before: nothing to compare
		}
		var why []string
		if n.err != nil {
			why = append(why, fmt.Sprintf("it no longer prepares (%v)", n.err))
		} else {
			for _, t := range newScans(b.lines, n.lines) {
				why = append(why, "it scans "+t)
			}
			if count(n.lines, "USE TEMP B-TREE") > count(b.lines, "USE TEMP B-TREE") {
				why = append(why, "it sorts in a temporary b-tree")
			}
			// Once per index, however many steps of the plan used it.
			gone := map[string]bool{}
			for _, l := range b.lines {
				if m := indexRE.FindStringSubmatch(l); m != nil && !indexes[m[1]] && !gone[m[1]] {
					gone[m[1]] = true
					why = append(why, fmt.Sprintf("index %s is gone", m[1]))
				}
			}
		}
		if len(why) == 0 {
			continue
		}
		diags = append(diags, sqlcheck.Diagnostic{Pos: pos, Code: CodePlanWorse, Text: fmt.Sprintf(
			"query %s (%s) gets a worse plan: %s; before: %s; after: %s",
			q.Name, q.Source, strings.Join(why, ", "), planText(b), planText(n))})
	}
	if len(diags) > 0 {
		p.Reporter.WriteReport(sqlcheck.Report{Text: "query plans", Diagnostics: diags})
	}
	return nil
}

// indexNames returns the names of the indexes of the database behind
// conn, SQLite's own for UNIQUE constraints included (Atlas's inspection
// names those otherwise, and a plan names them as SQLite does).
func indexNames(ctx context.Context, conn *sql.DB) (map[string]bool, error) {
	rows, err := conn.QueryContext(ctx, "SELECT name FROM sqlite_schema WHERE type = 'index'")
	if err != nil {
		return nil, fmt.Errorf("list indexes: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("list indexes: %w", err)
		}
		out[name] = true
	}
	return out, rows.Err()
}

// newScans returns the tables after scans more often than before does.
func newScans(before, after []string) []string {
	scans := func(lines []string) map[string]int {
		m := map[string]int{}
		for _, l := range lines {
			if s := scanRE.FindStringSubmatch(l); s != nil {
				m[s[1]]++
			}
		}
		return m
	}
	b := scans(before)
	var out []string
	for t, n := range scans(after) {
		if n > b[t] {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

func count(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

func planText(p queryPlan) string {
	if p.err != nil {
		return "(does not prepare)"
	}
	if len(p.lines) == 0 {
		return "(no plan)"
	}
	return "[" + strings.Join(p.lines, "; ") + "]"
}
