package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestEscapeFunctions(t *testing.T) {
	for _, tt := range []struct {
		name, in, text, data, property string
	}{
		{"plain", "table session", "table session", "table session", "table session"},
		{"line break", "a\n::error::x", `a\x0a::error::x`, "a%0A::error::x", "a%0A%3A%3Aerror%3A%3Ax"},
		{"carriage return", "a\r::x", `a\x0d::x`, "a%0D::x", "a%0D%3A%3Ax"},
		{"leading command", "::stop-commands::t", `\x3a:stop-commands::t`, `\x3a:stop-commands::t`, "%3A%3Astop-commands%3A%3At"},
		{"blanks before a command", "  ::error::x", `  \x3a:error::x`, `  \x3a:error::x`, "  %3A%3Aerror%3A%3Ax"},
		{"escape and bell", "\x1b[2J\a", `\x1b[2J\x07`, `\x1b[2J\x07`, `\x1b[2J\x07`},
		{"C1 and DEL", "a\u0085b\x7f", `a\x85b\x7f`, `a\x85b\x7f`, `a\x85b\x7f`},
		{"invalid UTF-8", "a\xffb", `a\xffb`, `a\xffb`, `a\xffb`},
		{"separators and bidi", "a\u2028b\u202ec", `a\u2028b\u202ec`, `a\u2028b\u202ec`, `a\u2028b\u202ec`},
		{"percent, comma, colon", "100%, a:b", "100%, a:b", "100%25, a:b", "100%25%2C a%3Ab"},
		{"unicode text kept", "tablé ☃", "tablé ☃", "tablé ☃", "tablé ☃"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.text, escapeText(tt.in))
			require.Equal(t, tt.data, escapeData(tt.in))
			require.Equal(t, tt.property, escapeProperty(tt.in))
		})
	}
}

// hostileObjects are statements planting schema objects whose names hold
// line breaks, escape sequences and GitHub workflow commands.
var hostileObjects = []string{
	"CREATE TABLE \"evil\n::error file=x::pwned-table\x1b[2J\" (x)",
	"ALTER TABLE session ADD COLUMN \"col\r\n::stop-commands::pwned-column\" TEXT",
	"CREATE INDEX \"idx\n::warning::pwned-index\x07\" ON session (\"col\r\n::stop-commands::pwned-column\")",
	"CREATE TRIGGER \"::notice::pwned-trigger\u2028\" AFTER INSERT ON session BEGIN SELECT 1; END",
}

// hostileDB returns a head database holding hostileObjects, and history
// rows that hold the same.
func hostileDB(t *testing.T) string {
	t.Helper()
	return headDB(t, append(hostileObjects,
		"UPDATE schema_revision SET hash = 'h' || char(10) || '::error::pwned-hash' || char(27) || '[31m', error = char(10) || '::error::pwned-error' WHERE version = (SELECT max(version) FROM schema_revision)",
		"INSERT INTO schema_revision (version, description, type, applied, total, executed_at, execution_time, hash, operator_version) VALUES ('9' || char(10) || '::error::pwned-version', 'x', 2, 1, 1, 0, 0, 'h', 'x')",
	)...)
}

// ownAnnotation is a workflow command migrate itself writes with -format
// github: anything else starting with "::" would be the file's.
var ownAnnotation = regexp.MustCompile(`^::(error|warning) file=[^:,]*,line=[0-9]+,col=1::`)

// requireClean fails if out has a control character other than the line
// feeds that end its lines, or a line starting with "::" that is not one
// of migrate's own annotations (github).
func requireClean(t *testing.T, out string, github bool) {
	t.Helper()
	for i, line := range strings.Split(out, "\n") {
		for _, r := range line {
			require.False(t, r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError || r == '\u2028' || r == '\u2029',
				"line %d holds control character %U: %q", i+1, r, line)
		}
		if strings.HasPrefix(strings.TrimSpace(line), "::") {
			require.True(t, github && ownAnnotation.MatchString(line), "line %d starts a workflow command: %q", i+1, line)
		}
	}
}

// No name or value read from a database file reaches the output raw, in
// any format or command that prints it; -json stays the document it is.
func TestFileContentEscaped(t *testing.T) {
	db, objects := hostileDB(t), headDB(t, hostileObjects...)
	for _, tt := range []struct {
		db     string // db when empty
		args   []string
		code   int
		github bool
		shows  []string // what the report must name (escaped), so the test sees the planted text
	}{
		{args: []string{"drift"}, code: exitFinding, shows: []string{"pwned-table", "pwned-column", "pwned-index", "pwned-trigger", "pwned-hash", "pwned-version"}},
		{args: []string{"drift", "-format", "github"}, code: exitFinding, github: true, shows: []string{"pwned-table", "pwned-column", "pwned-index", "pwned-trigger", "pwned-version"}},
		{args: []string{"drift", "-format", "gcc"}, code: exitFinding, shows: []string{"pwned-table", "pwned-column", "pwned-index", "pwned-trigger", "pwned-version"}},
		{args: []string{"up"}},
		{args: []string{"plan"}},
		{args: []string{"status"}},
		{args: []string{"lint", "-format", "github"}, github: true},
		{args: []string{"lint", "-format", "gcc"}},
		{args: []string{"lint"}},
		{db: objects, args: []string{"up"}, code: exitFinding, shows: []string{"pwned-table", "pwned-index", "pwned-trigger"}},
		{db: objects, args: []string{"plan"}, code: exitFinding, shows: []string{"pwned-table", "pwned-index", "pwned-trigger"}},
		{db: objects, args: []string{"drift"}, code: exitFinding, shows: []string{"pwned-table", "pwned-column", "pwned-index", "pwned-trigger"}},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			path := db
			if tt.db != "" {
				path = tt.db
			}
			code, stdout, stderr := runCmd(t, append(tt.args, "-db", path)...)
			require.NotEqual(t, exitOK, code, "the planted database is refused or reported")
			if tt.code != 0 {
				require.Equal(t, tt.code, code, stderr)
			}
			requireClean(t, stdout, tt.github)
			requireClean(t, stderr, false)
			for _, s := range tt.shows {
				require.Contains(t, stdout, s)
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		code, stdout, _ := runCmd(t, "drift", "-json", "-db", db)
		require.Equal(t, exitFinding, code)
		doc := decode[driftDoc](t, stdout)
		require.Contains(t, doc.Unknown, "table evil\n::error file=x::pwned-table\x1b[2J", "the document keeps the names as they are, JSON-escaped")
	})
}

// plan prints a migration file's description and statements: escaped,
// each on the lines the file lays it out on, its tabs kept.
func TestPlanEscapesMigrationText(t *testing.T) {
	files := withFiles(t, map[string]string{
		"{next}_x\x1b[31m.sql": "CREATE TABLE x (\r\n\tid INTEGER PRIMARY KEY,\r\n\tv TEXT DEFAULT '\n::error::pwned-default\x1b[2J'\r\n);\n",
	})
	code, stdout, stderr := runWith(t, files, "plan", "-db", filepath.Join(t.TempDir(), "new.db"))
	require.Equal(t, exitFinding, code, stderr)
	requireClean(t, strings.ReplaceAll(stdout, "\t", " "), false)
	requireClean(t, stderr, false)
	for _, want := range []string{
		expand(t, `-- version {next}: x\x1b[31m (1 statement)`),
		"CREATE TABLE x (\n\tid INTEGER PRIMARY KEY,\n\tv TEXT DEFAULT '\n\\x3a:error::pwned-default\\x1b[2J'\n);",
	} {
		require.Contains(t, stdout, want)
	}
}
