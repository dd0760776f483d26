package sqlitestore_test

// Checks of the sqlc-generated code in internal/db (and its subpackages),
// which the store runs, and of the SQL in queries/ it is generated from:
// no unexpanded sqlc macro or named parameter left in a generated
// statement, only generated files in internal/db, and no OFFSET anywhere.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	genDir     = filepath.Join("..", "..", "internal", "db")
	queriesDir = filepath.Join("..", "..", "queries")

	generatedHeader = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)
	// sqlcMacro matches any sqlc macro: sqlc.arg, sqlc.narg, sqlc.slice,
	// sqlc.embed and whatever comes next.
	sqlcMacro = regexp.MustCompile(`(?i)\bsqlc\s*\.\s*\w+`)
	// namedParam matches an @name parameter sqlc should have replaced.
	namedParam = regexp.MustCompile(`@\w+`)
	offsetWord = regexp.MustCompile(`(?i)\bOFFSET\b`)
	// limitComma matches SQLite's other OFFSET spelling, LIMIT <offset>, <count>.
	limitComma = regexp.MustCompile(`(?i)\bLIMIT\s+(\?\d*|\d+|[:@$]\w+|sqlc\.n?arg\(\w+\))\s*,`)
)

// goFiles returns every .go file under dir, recursively.
func goFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			out = append(out, path)
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, out, "no Go files under %s", dir)
	return out
}

// stringConstants returns every string literal assigned in a const or var
// declaration of the file at path: where sqlc puts its statements.
func stringConstants(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
	require.NoError(t, err)
	out := map[string]string{}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || (gd.Tok != token.CONST && gd.Tok != token.VAR) {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				s, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				name := "_"
				if i < len(vs.Names) {
					name = vs.Names[i].Name
				}
				out[name] = s
			}
		}
	}
	return out
}

// TestGeneratedCodeOnly checks that internal/db holds generated files only.
func TestGeneratedCodeOnly(t *testing.T) {
	for _, path := range goFiles(t, genDir) {
		src, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Regexp(t, generatedHeader, string(src), "%s is not generated code: internal/db holds only sqlc output", path)
	}
}

// TestNoSQLCMacrosInGeneratedSQL fails if a generated statement still holds
// a sqlc macro or an @name parameter: SQLite would reject it, or worse,
// bind it as an unrelated named parameter.
func TestNoSQLCMacrosInGeneratedSQL(t *testing.T) {
	statements := 0
	for _, path := range goFiles(t, genDir) {
		for name, sql := range stringConstants(t, path) {
			statements++
			t.Run(filepath.Base(path)+"/"+name, func(t *testing.T) {
				require.NotRegexp(t, sqlcMacro, sql, "unexpanded sqlc macro")
				require.NotRegexp(t, namedParam, sql, "unexpanded @name parameter")
				code := stripComments(sql)
				require.NotRegexp(t, offsetWord, code, "OFFSET in a generated statement")
				require.NotRegexp(t, limitComma, code, "LIMIT offset, count in a generated statement")
			})
		}
	}
	require.Greater(t, statements, 0, "no SQL constants found in %s", genDir)
}

// TestNoOffsetInQueries fails if any query in queries/ uses OFFSET (as a
// word, in any case, outside comments) or the LIMIT offset, count form:
// every page is a keyset page.
func TestNoOffsetInQueries(t *testing.T) {
	files := 0
	err := filepath.WalkDir(queriesDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".sql") {
			return err
		}
		files++
		src, err := os.ReadFile(path)
		require.NoError(t, err)
		code := stripComments(string(src))
		for i, line := range strings.Split(code, "\n") {
			require.NotRegexp(t, offsetWord, line, "%s:%d uses OFFSET", path, i+1)
		}
		require.NotRegexp(t, limitComma, code, "%s uses LIMIT offset, count", path)
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, files, 0, "no .sql files under %s", queriesDir)
}

// stripComments blanks out SQL comments (-- to end of line and /* */),
// leaving string literals and quoted identifiers alone and keeping line
// numbers, so that prose such as "never OFFSET" in a comment is not code.
func stripComments(sql string) string {
	var b strings.Builder
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			j := i + 1
			for j < len(sql) {
				if sql[j] == c {
					if j+1 < len(sql) && sql[j+1] == c { // doubled quote
						j += 2
						continue
					}
					break
				}
				j++
			}
			if j >= len(sql) {
				j = len(sql) - 1
			}
			b.WriteString(sql[i : j+1])
			i = j
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
			if i < len(sql) {
				b.WriteByte('\n')
			}
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			i += 2
			for i+1 < len(sql) && !(sql[i] == '*' && sql[i+1] == '/') {
				if sql[i] == '\n' {
					b.WriteByte('\n')
				}
				i++
			}
			i++ // at the closing '/'
			b.WriteByte(' ')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func TestStripComments(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"SELECT 1 -- never OFFSET\nFROM t", "SELECT 1 \nFROM t"},
		{"SELECT '-- not a comment' FROM t", "SELECT '-- not a comment' FROM t"},
		{"SELECT 'it''s' /* OFFSET\n 3 */ FROM t", "SELECT 'it''s' \n  FROM t"},
		{"SELECT \"a--b\" FROM t LIMIT 1 OFFSET 2", "SELECT \"a--b\" FROM t LIMIT 1 OFFSET 2"},
		{"-- only a comment", ""},
	} {
		require.Equal(t, tc.want, stripComments(tc.in), tc.in)
	}
	// The patterns catch what they must, and not what they must not.
	require.Regexp(t, offsetWord, stripComments("SELECT * FROM t LIMIT ? offset ?"))
	require.NotRegexp(t, offsetWord, stripComments("SELECT offset_seq FROM t -- OFFSET"))
	require.Regexp(t, limitComma, "SELECT * FROM t LIMIT 10, 20")
	require.Regexp(t, limitComma, "SELECT * FROM t LIMIT ?1, ?2")
	require.Regexp(t, limitComma, "SELECT * FROM t LIMIT sqlc.arg(skip), sqlc.arg(n)")
	require.NotRegexp(t, limitComma, "SELECT * FROM t LIMIT ?")
	require.Regexp(t, sqlcMacro, "WHERE a = sqlc.narg(a)")
	require.Regexp(t, sqlcMacro, "WHERE a IN (sqlc.slice('ids'))")
	require.Regexp(t, namedParam, "WHERE a = @after_sequence")
}
