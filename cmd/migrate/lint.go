package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"

	"ariga.io/atlas/sql/migrate"
	"ariga.io/atlas/sql/sqlcheck"
	"ariga.io/atlas/sql/sqlcheck/datadepend"
	"ariga.io/atlas/sql/sqlcheck/destructive"
	"ariga.io/atlas/sql/sqlcheck/incompatible"
	"ariga.io/atlas/sql/sqlclient"

	"github.com/securemsg/storage/migration"
	"github.com/securemsg/storage/migration/pipeline"
)

// frozenBaseline is the newest version whose findings are informational:
// version 14 landed before linting and is never edited again.
const frozenBaseline = migration.LegacyBaselineVersion

func cmdLint(ctx context.Context, env *cmdEnv) error {
	var (
		m   *migration.Migrator
		err error
	)
	if env.dir == "" {
		m, err = migration.Default()
	} else {
		if err := checkDir(env.dir); err != nil {
			return err
		}
		m, err = migration.New(os.DirFS(env.dir), ".")
	}
	if err != nil {
		return err
	}
	if !env.json {
		return lintDir(ctx, m.Dir(), env.stdout)
	}
	findings, files, err := lint(ctx, m.Dir())
	if err != nil {
		return err
	}
	doc := lintDoc{Command: "lint", OK: true, Files: files, Baseline: frozenBaseline, Findings: nonNil(findings)}
	for _, f := range findings {
		if f.Blocking {
			doc.Blocking++
		}
	}
	doc.OK = doc.Blocking == 0
	if err := env.emit(doc); err != nil {
		return err
	}
	if !doc.OK {
		return fmt.Errorf("%d finding(s) in versions above %s", doc.Blocking, frozenBaseline)
	}
	return nil
}

// lintDoc is lint's JSON document.
type lintDoc struct {
	Command string `json:"command"` // "lint"
	// OK is false when a finding is in a version above Baseline.
	OK       bool      `json:"ok"`
	Files    int       `json:"files"`
	Baseline string    `json:"baseline"` // findings at or below it are informational
	Blocking int       `json:"blocking"`
	Findings []finding `json:"findings"`
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

// finding is one diagnostic of one analyzer on one migration file.
type finding struct {
	Version  string `json:"version"`
	File     string `json:"file"`
	Line     int    `json:"line"` // 0 when Atlas gives no position
	Analyzer string `json:"analyzer"`
	Code     string `json:"code"` // Atlas's diagnostic code, e.g. DS102
	Text     string `json:"text"`
	// Blocking is false for findings in the frozen baseline.
	Blocking bool `json:"blocking"`
}

func (f finding) String() string {
	s := fmt.Sprintf("%s %s: %s: %s", f.Version, f.File, f.Analyzer, f.Text)
	switch {
	case f.Code != "" && f.Line > 0:
		s += fmt.Sprintf(" [%s, line %d]", f.Code, f.Line)
	case f.Line > 0:
		s += fmt.Sprintf(" [line %d]", f.Line)
	}
	if !f.Blocking {
		s += " (informational: version " + frozenBaseline + " is the frozen baseline)"
	}
	return s
}

// lintDir lints dir, prints every finding to w, one a line, and returns an
// error if a finding is in a version above the frozen baseline. dir must
// already be validated against its atlas.sum (migration.New does).
func lintDir(ctx context.Context, dir migrate.Dir, w io.Writer) error {
	findings, files, err := lint(ctx, dir)
	if err != nil {
		return err
	}
	blocking := 0
	for _, f := range findings {
		fmt.Fprintln(w, f)
		if f.Blocking {
			blocking++
		}
	}
	fmt.Fprintf(w, "lint: %d file(s), %d finding(s), %d above version %s\n", files, len(findings), blocking, frozenBaseline)
	if blocking > 0 {
		return fmt.Errorf("%d finding(s) in versions above %s", blocking, frozenBaseline)
	}
	return nil
}

// analyzers returns Atlas's destructive, data-dependent and
// backward-incompatible analyzers, with the SQLite handlers for
// data-dependent NOT NULL changes. Their "error" option is off: lint
// decides what fails from the findings, not from the analyzer's verdict.
func analyzers() ([]sqlcheck.NamedAnalyzer, error) {
	off := false
	ds, err := destructive.New(nil)
	if err != nil {
		return nil, err
	}
	ds.Error = &off
	dd, err := datadepend.New(nil, datadepend.Handler{AddNotNull: addNotNull, ModifyNotNull: modifyNotNull})
	if err != nil {
		return nil, err
	}
	dd.Error = &off
	bc, err := incompatible.New(nil)
	if err != nil {
		return nil, err
	}
	bc.Error = &off
	return []sqlcheck.NamedAnalyzer{ds, dd, bc}, nil
}

// addNotNull reports a NOT NULL column without default added to an
// existing table (SQLite refuses it on a non-empty table).
func addNotNull(p *datadepend.ColumnPass) ([]sqlcheck.Diagnostic, error) {
	return []sqlcheck.Diagnostic{{
		Pos:  p.Change.Stmt.Pos,
		Text: fmt.Sprintf("Adding a non-nullable column %q without default will fail in case table %q is not empty", p.Column.Name, p.Table.Name),
	}}, nil
}

// modifyNotNull reports a nullable column made NOT NULL without default.
func modifyNotNull(p *datadepend.ColumnPass) ([]sqlcheck.Diagnostic, error) {
	if p.Column.Default != nil {
		return nil, nil
	}
	return []sqlcheck.Diagnostic{{
		Pos:  p.Change.Stmt.Pos,
		Text: fmt.Sprintf("Modifying nullable column %q to non-nullable without default value might fail in case it contains NULL values", p.Column.Name),
	}}, nil
}

// lint replays dir, oldest version first, on a fresh dev database
// (pipeline.Replay). For each file it takes the schema changes of every
// statement (the realm inspected before and after it, diffed) and runs
// the analyzers over them, as `atlas migrate lint` does. It returns the
// findings and the number of files linted.
func lint(ctx context.Context, dir migrate.Dir) ([]finding, int, error) {
	azs, err := analyzers()
	if err != nil {
		return nil, 0, err
	}
	all, err := dir.Files()
	if err != nil {
		return nil, 0, fmt.Errorf("read migration directory: %w", err)
	}
	files := migrate.SkipCheckpointFiles(all)
	if len(files) == 0 {
		return nil, 0, fmt.Errorf("%w: no migration files", migration.ErrDirectory)
	}
	var findings []finding
	err = pipeline.Replay(ctx, files, func(ctx context.Context, dev *sqlclient.Client, rf *pipeline.ReplayedFile) error {
		f := rf.File
		var changes []*sqlcheck.Change
		for _, s := range rf.Statements {
			changes = append(changes, &sqlcheck.Change{Stmt: s.Stmt, Changes: fixRenames(s.Stmt, s.Changes)})
		}
		changes = foldRebuilds(dev, changes)
		sum, err := dev.RealmDiff(rf.From, rf.To)
		if err != nil {
			return fmt.Errorf("%s: diff: %w", f.Name(), err)
		}
		file := &sqlcheck.File{File: f, Changes: changes, Sum: sum, From: rf.From, To: rf.To}
		blocking := true
		if v, err := strconv.Atoi(f.Version()); err == nil {
			base, _ := strconv.Atoi(frozenBaseline)
			blocking = v > base
		}
		for _, az := range azs {
			pass := &sqlcheck.Pass{
				File: file,
				Dev:  dev,
				Reporter: sqlcheck.ReportWriterFunc(func(r sqlcheck.Report) {
					base := finding{Version: f.Version(), File: f.Name(), Analyzer: az.Name(), Blocking: blocking}
					if len(r.Diagnostics) == 0 {
						base.Text = r.Text
						findings = append(findings, base)
					}
					for _, d := range r.Diagnostics {
						fd := base
						fd.Text, fd.Code, fd.Line = d.Text, d.Code, pipeline.Line(f, d.Pos)
						findings = append(findings, fd)
					}
				}),
			}
			if err := az.Analyze(ctx, pass); err != nil {
				return fmt.Errorf("%s: analyzer %s: %w", f.Name(), az.Name(), err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return findings, len(files), nil
}
