package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/securemsg/storage/cmd/internal/pipeline"
	"github.com/securemsg/storage/internal/migration"
)

// frozenBaseline is the newest version whose findings are informational.
const frozenBaseline = pipeline.LintBaseline

func cmdLint(ctx context.Context, env *cmdEnv) error {
	doc := newLintDoc(env.db)
	env.doc = doc
	if err := env.checkFormat(); err != nil {
		return err
	}
	m, err := env.migrations()
	if err != nil {
		return err
	}
	queries, note := storeQueries()
	r, err := pipeline.Lint(ctx, m, pipeline.WithQueries(queries))
	if err != nil {
		return err
	}
	// What blocks: findings above the frozen baseline, or with -git-base
	// those in files added or changed since the base (a file the base
	// holds byte for byte has landed: pipeline.Landed).
	blockingWhat := "in versions above " + frozenBaseline
	switch {
	case env.gitBase != "":
		// The directory against the base branch's: its files have landed
		// (their findings inform), a file added below what it has, or one
		// of its files edited or removed, is a finding, whatever this
		// binary embeds.
		base, err := gitBaseDir(ctx, env, env.gitBase)
		if err != nil {
			return err
		}
		blockingWhat = "in files added or changed since " + env.gitBase
		if base != nil {
			if r.Findings, err = pipeline.Landed(r.Findings, m, base, env.gitBase); err != nil {
				return err
			}
			below, err := pipeline.AddedBelow(base, m, "the head of "+env.gitBase)
			if err != nil {
				return err
			}
			r.Findings = append(r.Findings, below...)
			// Edited or removed since the branch left the base: a file
			// the base gained after that is not yet merged, not removed.
			landed := base
			if fork := gitForkPoint(ctx, env, env.gitBase); fork != "" {
				if landed, err = gitBaseDir(ctx, env, fork); err != nil {
					return err
				}
			}
			if landed != nil {
				changed, err := pipeline.ChangedLanded(landed, m, env.gitBase)
				if err != nil {
					return err
				}
				r.Findings = append(r.Findings, changed...)
			}
		}
	case env.dir != "":
		// The directory against the one this binary was built with: a
		// file added below what it shipped, or one it shipped edited or
		// removed.
		if base, err := env.embedded(); err == nil {
			below, err := pipeline.AddedBelow(base, m, "the head already shipped")
			if err != nil {
				return err
			}
			r.Findings = append(r.Findings, below...)
			// A directory whose head is below the shipped one is an older
			// directory, not a change of the shipped one.
			if migration.CompareVersions(m.Head(), base.Head()) >= 0 {
				changed, err := pipeline.ChangedLanded(base, m, "the directory already shipped")
				if err != nil {
					return err
				}
				r.Findings = append(r.Findings, changed...)
			}
		}
	}
	if env.db != "" {
		// The directory against a database's history: a file added
		// below the version it is at.
		var st migration.Status
		err := env.readExisting(ctx, env.db, func(conn *sql.DB) (err error) {
			st, err = m.Status(ctx, conn)
			return err
		})
		if err != nil {
			return err
		}
		r.Findings = append(r.Findings, pipeline.OrderFindings(st)...)
	}
	blocking := r.Blocking()
	doc.Files, doc.Blocking, doc.QueryPlans, doc.Findings = r.Files, blocking, r.QueryPlans, nonNil(r.Findings)
	switch {
	case env.annotating():
		env.annotate(env.lintAnnotations(r.Findings))
	case !env.json:
		printLint(env.stdout, r, note, blockingWhat)
	}
	if blocking > 0 {
		return findingf("%d finding(s) %s", blocking, blockingWhat)
	}
	return nil
}

// newLintDoc returns lint's document (with -db db), before anything is
// read.
func newLintDoc(db string) *lintDoc {
	return &lintDoc{docHeader: docHeader{Command: "lint", DB: db}, Baseline: frozenBaseline, Findings: []pipeline.Finding{}}
}

// lintDoc is lint's JSON document.
type lintDoc struct {
	docHeader        // command "lint"; OK is false when a finding is in a version above Baseline
	Files     int    `json:"files"`
	Baseline  string `json:"baseline"` // findings at or below it are informational
	Blocking  int    `json:"blocking"`
	// QueryPlans is how many of the store's queries were planned before
	// and after each file (0 outside a checkout: see storeQueries).
	QueryPlans int                `json:"query_plans"`
	Findings   []pipeline.Finding `json:"findings"`
}

// storeQueries returns the store's queries (internal/db, generated from
// queries/) for the query-plan analyzer, read from the checkout lint runs
// in; outside a checkout it returns none and says why.
func storeQueries() ([]pipeline.Query, string) {
	root, err := repoRoot()
	if err != nil {
		return nil, "query plans not checked: not run inside a checkout of the module"
	}
	qs, err := pipeline.ReadQueries(filepath.Join(root, "internal", "db"), "queries")
	if err != nil {
		return nil, fmt.Sprintf("query plans not checked: %v", err)
	}
	return qs, ""
}

// checkDir says plainly when a -dir flag names no directory.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: directory does not exist", dir)
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}

// lintDir lints the directory of m (pipeline.Lint, planning queries),
// prints note (if any) and every finding to w, one a line, and returns an
// error if a finding is in a version above the frozen baseline.
func lintDir(ctx context.Context, m *migration.Migrator, queries []pipeline.Query, note string, w io.Writer) error {
	r, err := pipeline.Lint(ctx, m, pipeline.WithQueries(queries))
	if err != nil {
		return err
	}
	printLint(w, r, note, "in versions above "+frozenBaseline)
	if blocking := r.Blocking(); blocking > 0 {
		return findingf("%d finding(s) in versions above %s", blocking, frozenBaseline)
	}
	return nil
}

// printLint prints note (if any), every finding of r, one a line, and a
// summary line counting the blocking ones (blockingWhat says which: "in
// versions above 14").
func printLint(w io.Writer, r pipeline.LintReport, note, blockingWhat string) {
	if note != "" {
		fmt.Fprintln(w, "lint: "+note)
	}
	for _, f := range r.Findings {
		fmt.Fprintln(w, escapeText(f.String()))
	}
	if blockingWhat == "in versions above "+frozenBaseline {
		fmt.Fprintf(w, "lint: %d file(s), %d finding(s), %d blocking\n", r.Files, len(r.Findings), r.Blocking())
		return
	}
	fmt.Fprintf(w, "lint: %d file(s), %d finding(s), %d blocking (%s)\n", r.Files, len(r.Findings), r.Blocking(), strings.TrimPrefix(blockingWhat, "in "))
}
