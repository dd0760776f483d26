package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"ariga.io/atlas/sql/migrate"
	"ariga.io/atlas/sql/sqlcheck"
	"ariga.io/atlas/sql/sqlcheck/datadepend"
	"ariga.io/atlas/sql/sqlcheck/destructive"
	"ariga.io/atlas/sql/sqlcheck/incompatible"
	"ariga.io/atlas/sql/sqlclient"

	"github.com/securemsg/storage/internal/migration"
)

// LintBaseline is the newest version whose findings are informational:
// version 14 landed before linting and is never edited again.
const LintBaseline = migration.LegacyBaselineVersion

// Finding is one diagnostic of one analyzer on one migration file.
type Finding struct {
	Version  string `json:"version"`
	File     string `json:"file"`
	Line     int    `json:"line"` // 0 when Atlas gives no position
	Analyzer string `json:"analyzer"`
	Code     string `json:"code"` // Atlas's diagnostic code, e.g. DS102
	Text     string `json:"text"`
	// Blocking is false for findings at or below LintBaseline, and for
	// those Informational explains.
	Blocking bool `json:"blocking"`
	// Informational says why a finding above LintBaseline does not block
	// ("landed in origin/main", a backfill's UPDATE); "" otherwise.
	Informational string `json:"informational,omitempty"`
}

// String describes the finding in one line, as cmd/migrate lint prints it.
func (f Finding) String() string {
	s := fmt.Sprintf("%s %s: %s: %s", f.Version, f.File, f.Analyzer, f.Text)
	switch {
	case f.Code != "" && f.Line > 0:
		s += fmt.Sprintf(" [%s, line %d]", f.Code, f.Line)
	case f.Line > 0:
		s += fmt.Sprintf(" [line %d]", f.Line)
	}
	switch {
	case !f.Blocking && f.Informational != "":
		s += " (informational: " + f.Informational + ")"
	case !f.Blocking:
		s += " (informational: version " + LintBaseline + " is the frozen baseline)"
	}
	return s
}

// LintReport is what Lint found in one migration directory.
type LintReport struct {
	// Files is the number of migration files linted.
	Files int
	// QueryPlans is the number of queries QueryPlans planned before and
	// after each file (0 without WithQueries).
	QueryPlans int
	// Findings lists every finding, oldest version first.
	Findings []Finding
}

// Blocking returns the number of findings in versions above LintBaseline:
// a pipeline fails the directory when it is not 0.
func (r LintReport) Blocking() int {
	n := 0
	for _, f := range r.Findings {
		if f.Blocking {
			n++
		}
	}
	return n
}

// LintOption configures Lint.
type LintOption func(*lintOptions)

type lintOptions struct{ queries []Query }

// WithQueries has Lint run QueryPlans over queries (ReadQueries): each
// is planned before and after every file.
func WithQueries(queries []Query) LintOption {
	return func(o *lintOptions) { o.queries = queries }
}

// Lint replays the directory of m, oldest version first, on a fresh dev
// database (Replay) and runs Atlas's destructive, data-dependent and
// backward-incompatible analyzers over each file, as `atlas migrate lint`
// does, then SchemaLoss and, with WithQueries, QueryPlans: for each file it takes the schema changes of every statement (the
// realm inspected before and after it, diffed), with renames and SQLite's
// table rebuilds recognised from the statement text. Findings are the
// report, not an error: Lint returns an error only when the directory
// cannot be replayed or analysed (wrapping migration.ErrDirectory when it
// holds no migration file).
func Lint(ctx context.Context, m *migration.Migrator, opts ...LintOption) (LintReport, error) {
	var o lintOptions
	for _, opt := range opts {
		opt(&o)
	}
	report := LintReport{QueryPlans: len(o.queries)}
	azs, err := analyzers(o.queries)
	if err != nil {
		return report, err
	}
	all, err := m.Dir().Files()
	if err != nil {
		return report, fmt.Errorf("read migration directory: %w", err)
	}
	files := migrate.SkipCheckpointFiles(all)
	if len(files) == 0 {
		return report, fmt.Errorf("%w: no migration files", migration.ErrDirectory)
	}
	err = Replay(ctx, files, func(ctx context.Context, dev *sqlclient.Client, rf *ReplayedFile) error {
		f := rf.File
		var changes []*sqlcheck.Change
		for _, s := range rf.Statements {
			changes = append(changes, &sqlcheck.Change{Stmt: s.Stmt, Changes: fixRenames(s.Stmt, s.Changes)})
		}
		changes = foldRebuilds(dev, changes)
		var stmts, changed []*migrate.Stmt
		for _, s := range rf.Statements {
			stmts = append(stmts, s.Stmt)
		}
		for _, c := range changes {
			changed = append(changed, c.Stmt)
		}
		nl := nolintOf(f, stmts, changed)
		sum, err := dev.RealmDiff(rf.From, rf.To)
		if err != nil {
			return fmt.Errorf("%s: diff: %w", f.Name(), err)
		}
		file := &sqlcheck.File{File: f, Changes: changes, Sum: sum, From: rf.From, To: rf.To}
		blocking := migration.CompareVersions(f.Version(), LintBaseline) > 0
		for _, az := range azs {
			pass := &sqlcheck.Pass{
				File: file,
				Dev:  dev,
				Reporter: sqlcheck.ReportWriterFunc(func(r sqlcheck.Report) {
					fd := Finding{Version: f.Version(), File: f.Name(), Analyzer: az.Name(), Blocking: blocking}
					if len(r.Diagnostics) == 0 && !nl.ignored {
						fd.Text = r.Text
						report.Findings = append(report.Findings, fd)
					}
					for _, d := range r.Diagnostics {
						if nl.skips(d.Pos, az.Name(), d.Code) {
							continue // accepted by an atlas:nolint directive
						}
						fd := fd
						fd.Text, fd.Code, fd.Line = d.Text, d.Code, Line(f, d.Pos)
						if why := informational[d.Code]; why != "" && fd.Blocking {
							fd.Blocking, fd.Informational = false, why
						}
						report.Findings = append(report.Findings, fd)
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
		return LintReport{}, err
	}
	report.Files = len(files)
	return report, nil
}

// Landed returns findings with those in a file of m that base holds byte
// for byte made informational ("landed in " + ref): a pipeline that lints
// against the base branch (cmd/migrate lint -git-base) blocks only on the
// files a change adds or edits, as Atlas's migrate lint --git-base reports
// only the files added since the base. Findings of OrderAnalyzer stay
// blocking. It returns an error if either directory cannot be read.
func Landed(findings []Finding, m, base *migration.Migrator, ref string) ([]Finding, error) {
	bytesOf := func(m *migration.Migrator) (map[string][]byte, error) {
		files, err := m.Dir().Files()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", migration.ErrDirectory, err)
		}
		out := map[string][]byte{}
		for _, f := range files {
			out[f.Name()] = f.Bytes()
		}
		return out, nil
	}
	ours, err := bytesOf(m)
	if err != nil {
		return nil, err
	}
	theirs, err := bytesOf(base)
	if err != nil {
		return nil, err
	}
	out := slices.Clone(findings)
	for i, f := range out {
		b, ok := theirs[f.File]
		if ok && f.Blocking && f.Analyzer != OrderAnalyzer && bytes.Equal(b, ours[f.File]) {
			out[i].Blocking, out[i].Informational = false, "landed in "+ref
		}
	}
	return out, nil
}

// OrderAnalyzer is the Analyzer of OrderFindings.
const OrderAnalyzer = "order"

// OrderFindings returns one blocking finding per migration file added
// below a database's version (st.OutOfOrder, from the database's
// migration.Status against the directory linted): such a file never runs
// on that database while a new one gets it, and Up refuses it.
func OrderFindings(st migration.Status) []Finding {
	var out []Finding
	for _, name := range st.OutOfOrder {
		out = append(out, Finding{
			Version: versionOf(name), File: name, Analyzer: OrderAnalyzer, Blocking: true,
			Text: fmt.Sprintf("version %s is at or below version %s, the database's newest, but not in its history: it would never run there while a new database gets it (up refuses); give it a version above %s", versionOf(name), st.Current, st.Current),
		})
	}
	return out
}

// AddedBelow returns one blocking finding per migration file of m that
// base does not hold and whose version is at or below base's head: a file
// added below what base (the directory a fleet was migrated with, such as
// the one a released binary embeds or the base branch has) already
// shipped, which would never run on a database base migrated while a new
// one gets it. baseName says what base is in the finding's words (as "the
// head already shipped", "the head of main"). It returns an error if
// either directory cannot be read.
func AddedBelow(base, m *migration.Migrator, baseName string) ([]Finding, error) {
	files, shipped, err := filesOf(m, base)
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, f := range files {
		if migration.CompareVersions(f.Version(), base.Head()) > 0 || slices.ContainsFunc(shipped, func(s migrate.File) bool { return s.Name() == f.Name() }) {
			continue
		}
		out = append(out, Finding{
			Version: f.Version(), File: f.Name(), Analyzer: OrderAnalyzer, Blocking: true,
			Text: fmt.Sprintf("version %s is at or below version %s, %s, but not in that directory: it would never run on a database migrated to %s while a new database gets it; give it a version above %s", f.Version(), base.Head(), baseName, base.Head(), base.Head()),
		})
	}
	return out, nil
}

// ChangedLanded returns one blocking finding per migration file of base
// that m holds with other bytes or does not hold: a landed file edited,
// removed or renamed. A database that ran it records its hash or its
// version, which no longer match (up refuses it), while a new database
// runs the new text or never runs the old; the change belongs in a new
// version. baseName says what base is in the finding's words (as "main").
// It returns an error if either directory cannot be read.
func ChangedLanded(base, m *migration.Migrator, baseName string) ([]Finding, error) {
	files, shipped, err := filesOf(m, base)
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, s := range shipped {
		i := slices.IndexFunc(files, func(f migrate.File) bool { return f.Name() == s.Name() })
		var text string
		switch {
		case i < 0:
			text = fmt.Sprintf("%s is in %s but not in this directory: a landed migration is never removed or renamed (a database that ran it records a version the directory no longer has, while a new database never runs it); restore it", s.Name(), baseName)
		case !bytes.Equal(files[i].Bytes(), s.Bytes()):
			text = fmt.Sprintf("%s differs from the file in %s: a landed migration is never edited (a database that ran it records its old hash and up refuses it, while a new database runs the new text); restore it and put the change in a new version", s.Name(), baseName)
		default:
			continue
		}
		out = append(out, Finding{Version: s.Version(), File: s.Name(), Analyzer: OrderAnalyzer, Blocking: true, Text: text})
	}
	return out, nil
}

// filesOf returns the files of m and of base, the directory it is judged
// against, or ErrDirectory if either cannot be read.
func filesOf(m, base *migration.Migrator) (files, shipped []migrate.File, err error) {
	if files, err = m.Dir().Files(); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", migration.ErrDirectory, err)
	}
	if shipped, err = base.Dir().Files(); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", migration.ErrDirectory, err)
	}
	return files, shipped, nil
}

// analyzers returns Atlas's destructive, data-dependent and
// backward-incompatible analyzers, with the SQLite handlers for
// data-dependent NOT NULL changes, then SchemaLoss, WholeTable and, if queries is not
// empty, QueryPlans over them. The "error" option of Atlas's analyzers is
// off: the caller decides what fails from the findings, not from the
// analyzer's verdict.
func analyzers(queries []Query) ([]sqlcheck.NamedAnalyzer, error) {
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
	azs := []sqlcheck.NamedAnalyzer{ds, dd, bc, SchemaLoss{}, WholeTable{}}
	if len(queries) > 0 {
		azs = append(azs, &QueryPlans{Queries: queries})
	}
	return azs, nil
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
