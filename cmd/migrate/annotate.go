package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"ariga.io/atlas/sql/migrate"

	"github.com/securemsg/storage/cmd/internal/frozen"
	"github.com/securemsg/storage/cmd/internal/pipeline"
	"github.com/securemsg/storage/internal/migration"
)

// Report formats of -format, for the commands that report findings (lint,
// drift, fixture-test).
const (
	formatText   = "text"   // the command's own report
	formatGitHub = "github" // GitHub Actions workflow commands: ::error file=F,line=L,col=C::msg
	formatGCC    = "gcc"    // compiler lines: F:L:C: error: msg
)

// formatFlag declares -format.
func formatFlag(fs *flag.FlagSet, env *cmdEnv) {
	fs.StringVar(&env.format, "format", formatText, "report `FORMAT`: text, github (GitHub Actions ::error/::warning workflow commands) or gcc (file:line:col: severity: message), one finding a line on stdout, paths relative to the repository root")
}

// withFormat adds -format (formatFlag) to a command's flags.
func withFormat(flags func(*flag.FlagSet, *cmdEnv)) func(*flag.FlagSet, *cmdEnv) {
	return func(fs *flag.FlagSet, env *cmdEnv) {
		flags(fs, env)
		formatFlag(fs, env)
	}
}

// checkFormat returns a usage error for an unknown -format, or one given
// with -json (a run writes one report).
func (env *cmdEnv) checkFormat() error {
	switch env.format {
	case "", formatText:
		return nil
	case formatGitHub, formatGCC:
		if env.json {
			return &usageError{msg: "-format " + env.format + " and -json are exclusive: give one"}
		}
		return nil
	}
	return &usageError{msg: fmt.Sprintf("-format %q: want text, github or gcc", env.format)}
}

// annotating reports whether the command writes annotations (-format
// github or gcc) instead of its text report.
func (env *cmdEnv) annotating() bool { return env.format == formatGitHub || env.format == formatGCC }

// annotation is one finding as a CI system reads it.
type annotation struct {
	file     string // relative to the repository root, slash-separated
	line     int    // 1 when nothing better is known
	severity string // "error" or "warning"
	msg      string
}

// annotate writes as, one a line, in env's -format, each file and message
// escaped for it: with github as the runner unescapes a workflow command
// (escapeData, escapeProperty), so a line break in the message stays one
// (%0A) and "a\nb" and "a b" stay distinct; with gcc its blanks and line
// breaks folded to one space (oneLine), as a compiler line has them.
func (env *cmdEnv) annotate(as []annotation) {
	for _, a := range as {
		line := max(a.line, 1)
		if env.format == formatGitHub {
			fmt.Fprintf(env.stdout, "::%s file=%s,line=%d,col=1::%s\n", a.severity, escapeProperty(a.file), line, escapeData(a.msg))
			continue
		}
		fmt.Fprintf(env.stdout, "%s:%d:1: %s: %s\n", escapeText(a.file), line, a.severity, escapeText(oneLine(a.msg)))
	}
}

// repoRelative returns path relative to the repository root, slash-
// separated, when it is inside the checkout; else path as it is.
func repoRelative(path string) string {
	root, err := repoRoot()
	if err != nil {
		return filepath.ToSlash(path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.ToSlash(path)
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return filepath.ToSlash(path)
	}
	return filepath.ToSlash(rel)
}

// migrationFile returns the repository-relative path of the migration
// file name in the directory env reads: -dir's, else the checkout's
// schema/migrations, where the embedded directory comes from.
func (env *cmdEnv) migrationFile(name string) string {
	if env.dir != "" {
		return repoRelative(filepath.Join(env.dir, name))
	}
	return checkoutMigrations + "/" + name
}

// lintAnnotations returns lint's findings as annotations: a finding in a
// version above the baseline is an error, one at or below it a warning.
func (env *cmdEnv) lintAnnotations(fs []pipeline.Finding) []annotation {
	var out []annotation
	for _, f := range fs {
		sev := "error"
		if !f.Blocking {
			sev = "warning"
		}
		msg := f.Analyzer + ": " + f.Text
		if f.Code != "" {
			msg += " [" + f.Code + "]"
		}
		out = append(out, annotation{file: env.migrationFile(f.File), line: f.Line, severity: sev, msg: msg})
	}
	return out
}

// driftAnnotations returns drift's findings as annotations, each at the
// line of the migration that defines what differs (the newest CREATE or
// ALTER naming it; the history row's file), or at the database file when
// no migration names it (an object only the database has).
func (env *cmdEnv) driftAnnotations(m *migration.Migrator, path string, d pipeline.Differences, unknown []string) []annotation {
	files, _ := m.Dir().Files()
	db := repoRelative(path)
	var out []annotation
	for _, u := range unknown {
		out = append(out, annotation{file: db, severity: "error", msg: "no migration defines " + u})
	}
	for _, f := range d.Found {
		a := annotation{file: db, severity: "error", msg: f.String()}
		for _, name := range []string{f.Name, f.Table} {
			if name == "" {
				continue
			}
			if file, line := definedAt(files, name); file != "" {
				a.file, a.line = env.migrationFile(file), line
				break
			}
		}
		out = append(out, a)
	}
	if len(d.Found) == 0 && len(d.Schema) > 0 {
		out = append(out, annotation{file: db, severity: "error", msg: "the schema differs from head (run drift for the SQL)"})
	}
	for _, h := range d.History {
		a := annotation{file: db, severity: "error", msg: h.String()}
		if h.File != "" {
			a.file, a.line = env.migrationFile(h.File), 1
		}
		out = append(out, a)
	}
	return out
}

// definedAt returns the newest file of files that defines name, and the
// line of the statement that does: a CREATE of it, an ALTER TABLE of it,
// or the CREATE TABLE of the copy a rebuild renames to it (CREATE TABLE
// new_T ... ALTER TABLE new_T RENAME TO T defines T at its CREATE). Names
// compare as SQLite's do, without case. It returns "" if no file does.
func definedAt(files []migrate.File, name string) (string, int) {
	is := func(ident string) bool { return strings.EqualFold(unquoteIdent(ident), name) }
	for _, f := range slices.Backward(files) {
		stmts, err := f.StmtDecls()
		if err != nil {
			continue
		}
		copyOf := "" // the rebuild's copy renamed to name
		for _, s := range stmts {
			if m := renameToRE.FindStringSubmatch(s.Text); m != nil && is(m[3]) {
				copyOf = unquoteIdent(m[2])
			}
		}
		for _, s := range stmts {
			m := createRE.FindStringSubmatch(s.Text)
			if m == nil {
				m = alterRE.FindStringSubmatch(s.Text)
			}
			if m != nil && (is(m[2]) || (copyOf != "" && strings.EqualFold(unquoteIdent(m[2]), copyOf))) {
				return f.Name(), pipeline.Line(f, s.Pos)
			}
		}
	}
	return "", 0
}

// sqlIdent is an SQLite identifier, quoted or bare.
const sqlIdent = `("[^"]+"|` + "`[^`]+`" + `|\[[^\]]+\]|[A-Za-z_][A-Za-z0-9_$]*)`

var (
	createRE   = regexp.MustCompile(`(?is)^\s*CREATE\s+(?:UNIQUE\s+)?(?:TEMP\s+|TEMPORARY\s+)?(?:TABLE|INDEX|VIEW|TRIGGER)\s+(?:IF\s+NOT\s+EXISTS\s+)?(?:` + sqlIdent + `\s*\.\s*)?` + sqlIdent)
	alterRE    = regexp.MustCompile(`(?is)^\s*ALTER\s+TABLE\s+(?:` + sqlIdent + `\s*\.\s*)?` + sqlIdent)
	renameToRE = regexp.MustCompile(`(?is)^\s*ALTER\s+TABLE\s+(?:` + sqlIdent + `\s*\.\s*)?` + sqlIdent + `\s+RENAME\s+TO\s+` + sqlIdent)
)

// unquoteIdent returns an identifier without its quotes.
func unquoteIdent(s string) string {
	if len(s) >= 2 {
		switch s[0] {
		case '"', '`', '[':
			return s[1 : len(s)-1]
		}
	}
	return s
}

// fixtureAnnotations returns fixture-test's failed checks as
// annotations, at the row a data check names (frozen.Check's File and
// Line) or at the fixture's fixture.sql.
func fixtureAnnotations(docs []fixtureDoc) []annotation {
	var out []annotation
	for _, d := range docs {
		for _, c := range d.Checks {
			if c.OK {
				continue
			}
			file := frozen.FixtureFile
			if c.File != "" {
				file = c.File
			}
			out = append(out, annotation{file: repoRelative(filepath.Join(d.Dir, file)), line: c.Line, severity: "error", msg: c.Name + ": " + c.Error})
		}
	}
	return out
}
