package doccheck

import (
	"context"
	"database/sql"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/testkit/migrationtest"
	"github.com/securemsg/storage/schema"
	"github.com/stretchr/testify/require"
)

// packages maps each package name of both modules to its directories,
// relative to the repository root: a document may name any of them
// (client.Open, store.ErrInUse, legacy.Upgrade), and what it names must
// exist. Commands (package main), generated code and test-only packages
// are left out.
func packages(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin") {
			return filepath.SkipDir
		}
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, path, func(fi os.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		for pkg := range pkgs {
			if pkg == "main" {
				continue
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			out[pkg] = append(out[pkg], rel)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// documents are the Markdown files whose names are checked: the README,
// docs/, the security and benchmark reports, and the tools' guides. The
// frozen fixtures' READMEs are history and are not.
func documents(t *testing.T, root string) []string {
	t.Helper()
	docs := []string{"README.md", "SECURITY.md", "BENCHMARKS.md", "queries/README.md"}
	for _, pattern := range []string{"docs/*.md", "cmd/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		require.NoError(t, err)
		for _, f := range m {
			rel, err := filepath.Rel(root, f)
			require.NoError(t, err)
			docs = append(docs, rel)
		}
	}
	return docs
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../..")
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, "go.mod"))
	require.NoError(t, err, "the repository root is three levels up")
	return dir
}

// topDirs are the repository's top-level directories (each held to exist
// by TestDocumentsNamePathsThatExist).
var topDirs = []string{"client", "cmd", "docs", "examples", "fixtures", "internal", "queries", "reliability", "schema", "seal", "session", "store", "transport"}

// A repository path a document names: a top-level directory of the
// project, then path elements.
var repoPath = regexp.MustCompile(`(?:^|[\s(\x60'"])\.?/?((?:` + strings.Join(topDirs, "|") + `)/[\w./-]*[\w/])`)

var (
	member    = regexp.MustCompile(`\.[A-Z]\w*$`)
	migration = regexp.MustCompile(`^schema/migrations/(\d+)_`)
)

// future reports whether p is a migration file of a version above the
// directory's head: a guide's example of the next migration.
func future(t *testing.T, root, p string) bool {
	m := migration.FindStringSubmatch(p)
	if m == nil {
		return false
	}
	files, err := filepath.Glob(filepath.Join(root, "schema/migrations/*.sql"))
	require.NoError(t, err)
	head := 0
	for _, f := range files {
		if n, err := strconv.Atoi(strings.SplitN(filepath.Base(f), "_", 2)[0]); err == nil && n > head {
			head = n
		}
	}
	v, _ := strconv.Atoi(m[1])
	return v > head
}

// TestDocumentsNamePathsThatExist: every file or directory of the
// repository a document names (internal/storeimpl, cmd/migrate/README.md,
// ...) exists, relative to the repository root or to the document.
func TestDocumentsNamePathsThatExist(t *testing.T) {
	root := repoRoot(t)
	for _, d := range topDirs {
		require.DirExists(t, filepath.Join(root, d), "a path a document names starts with a top-level directory of the repository")
	}
	var missing []string
	checked := 0
	for _, docPath := range documents(t, root) {
		b, err := os.ReadFile(filepath.Join(root, docPath))
		require.NoError(t, err)
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range repoPath.FindAllStringSubmatch(line, -1) {
				p := strings.TrimSuffix(m[1], ".")
				p = member.ReplaceAllString(p, "") // internal/sqliteaccess.DSN names the package
				if strings.ContainsAny(p, "*") || strings.Contains(p, "NN") || future(t, root, p) {
					continue // a pattern, or the guide's example of a next migration
				}
				checked++
				_, errRoot := os.Stat(filepath.Join(root, p))
				_, errDoc := os.Stat(filepath.Join(root, filepath.Dir(docPath), p))
				if errRoot != nil && errDoc != nil {
					missing = append(missing, docPath+":"+strconv.Itoa(i+1)+": "+p)
				}
			}
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "the documents name paths that do not exist")
	require.Greater(t, checked, 20, "the documents name the repository's files: a scan that finds few is broken")
}

var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

// TestGoBlocksCompile: every Go block in README.md and docs/ is a whole
// file (it starts with its package clause) and builds against this
// module, so that no example a reader copies is stale.
func TestGoBlocksCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds each block with the go command")
	}
	root := repoRoot(t)
	docs := []string{"README.md"}
	m, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	for _, f := range m {
		rel, _ := filepath.Rel(root, f)
		docs = append(docs, rel)
	}
	blocks := 0
	for _, docPath := range docs {
		b, err := os.ReadFile(filepath.Join(root, docPath))
		require.NoError(t, err)
		for i, mm := range goBlock.FindAllStringSubmatch(string(b), -1) {
			blocks++
			src := mm[1]
			require.Regexp(t, `(?m)^package \w+`, src, "%s: Go block %d is not a whole file", docPath, i+1)
			// A directory inside the module (so that its imports resolve),
			// whose leading dot keeps it out of ./... .
			dir, err := os.MkdirTemp(root, ".doccheck-")
			require.NoError(t, err)
			t.Cleanup(func() { os.RemoveAll(dir) })
			require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o600))
			cmd := exec.Command("go", "vet", "./"+filepath.Base(dir))
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s: Go block %d does not build:\n%s", docPath, i+1, out)
		}
	}
	require.Positive(t, blocks, "README.md shows the quickstart as a Go block")
}

// sealedRow is a row of SECURITY.md's table of sealed records: its record
// type's number and name, and the column it seals.
var sealedRow = regexp.MustCompile("^\\| (\\d+) `(Record\\w+)` \\| `(\\w+)\\.(\\w+)` \\|")

// TestSecurityListsEveryRecordType: SECURITY.md's table of sealed records
// lists every seal.RecordType constant once, with its value.
func TestSecurityListsEveryRecordType(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, filepath.Join(root, "seal"), func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	require.NoError(t, err)
	code := map[string]string{}
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				for _, s := range g.Specs {
					v := s.(*ast.ValueSpec)
					if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "RecordType" || len(v.Values) != 1 {
						continue
					}
					lit, ok := v.Values[0].(*ast.BasicLit)
					require.True(t, ok, "%s is not a literal", v.Names[0].Name)
					code[v.Names[0].Name] = lit.Value
				}
			}
		}
	}
	require.NotEmpty(t, code, "seal declares its record types as RecordType constants")
	b, err := os.ReadFile(filepath.Join(root, "SECURITY.md"))
	require.NoError(t, err)
	doc := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if m := sealedRow.FindStringSubmatch(line); m != nil {
			require.NotContains(t, doc, m[2], "%s listed twice", m[2])
			doc[m[2]] = m[1]
		}
	}
	require.Equal(t, code, doc, "SECURITY.md's table of sealed records against seal's RecordType constants")
}

// TestLayoutNamesEveryPackage: docs/LAYOUT.md, the map of where each
// concept lives, names every Go package of both modules, so that a
// package added or moved cannot be left out of it (the paths it names are
// held to exist by TestDocumentsNamePathsThatExist).
func TestLayoutNamesEveryPackage(t *testing.T) {
	root := repoRoot(t)
	layout, err := os.ReadFile(filepath.Join(root, "docs", "LAYOUT.md"))
	require.NoError(t, err)
	var missing []string
	seen := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		gofiles, err := filepath.Glob(filepath.Join(path, "*.go"))
		if err != nil {
			return err
		}
		for _, f := range gofiles {
			if !strings.HasSuffix(f, "_test.go") {
				rel, err := filepath.Rel(root, path)
				if err != nil {
					return err
				}
				seen++
				if !strings.Contains(string(layout), "`"+filepath.ToSlash(rel)+"`") {
					missing = append(missing, rel)
				}
				break
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, missing, "docs/LAYOUT.md does not name these packages")
	require.Greater(t, seen, 30, "a walk that finds few packages is broken")
}

// runsSQL matches a call that runs a statement through database/sql.
var runsSQL = regexp.MustCompile(`\.(ExecContext|QueryContext|QueryRowContext|PrepareContext|Exec|Query|QueryRow|Prepare)\(`)

// TestSQLOutsideSqlcIsListed: a library file that runs SQL itself rather
// than through the generated queries is one queries/README.md lists, with
// what sqlc cannot express there; a new one must be added to the list (or
// its statement moved to queries/*.sql).
func TestSQLOutsideSqlcIsListed(t *testing.T) {
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "queries", "README.md"))
	require.NoError(t, err)
	var unlisted []string
	found := 0
	for _, dir := range []string{"client", "internal", "schema", "seal", "session", "store", "transport"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				if rel == "internal/db" || rel == "internal/testkit" || d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if !runsSQL.Match(src) {
				return nil
			}
			found++
			if !strings.Contains(string(readme), "`"+rel+"`") {
				unlisted = append(unlisted, rel)
			}
			return nil
		})
		require.NoError(t, err)
	}
	require.Empty(t, unlisted, "these library files run SQL outside the generated queries and queries/README.md does not list them")
	require.Greater(t, found, 0, "the scan finds the files it is about")
}

// clearRow is a row of SECURITY.md's table of columns in the clear: a
// table and its columns.
var clearRow = regexp.MustCompile("^\\| `(\\w+)` \\| (`\\w+`(?:, `\\w+`)*) \\|$")

// TestSecurityListsEveryClearColumn: every column of every table the
// migrations define at head is either sealed (SECURITY.md's table of
// sealed records names it) or listed in SECURITY.md's table of columns in
// the clear, and that table names only columns that exist; so a migration
// that adds a column in the clear cannot leave the inventory of what a
// reader of the file sees without it.
func TestSecurityListsEveryClearColumn(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "SECURITY.md"))
	require.NoError(t, err)
	sealed := map[string]bool{}
	clear := map[string][]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if m := sealedRow.FindStringSubmatch(line); m != nil {
			sealed[m[3]+"."+m[4]] = true
		}
		if m := clearRow.FindStringSubmatch(line); m != nil {
			require.NotContains(t, clear, m[1], "%s listed twice", m[1])
			for _, c := range strings.Split(m[2], ", ") {
				clear[m[1]] = append(clear[m[1]], strings.Trim(c, "`"))
			}
		}
	}
	require.NotEmpty(t, sealed)
	require.NotEmpty(t, clear, "SECURITY.md has a table of columns in the clear")

	ctx := context.Background()
	conn, err := sql.Open(sqlitedriver.Name, "file:"+filepath.Join(t.TempDir(), "head.db"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = migrationtest.Default(t).Up(ctx, conn)
	require.NoError(t, err)
	history := regexp.MustCompile(`(?i)CREATE TABLE\s+(?:IF NOT EXISTS\s+)?"?(\w+)`).FindStringSubmatch(schema.RevisionTable())
	require.NotNil(t, history, "the history table's name")
	tables := migrationtest.Strings(t, conn, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\' AND name != ? ORDER BY name`, history[1])
	want := map[string][]string{}
	for _, table := range tables {
		// table_xinfo: generated columns are in the file too.
		for _, c := range migrationtest.Strings(t, conn, `SELECT name FROM pragma_table_xinfo(?) ORDER BY cid`, table) {
			if !sealed[table+"."+c] {
				want[table] = append(want[table], c)
			}
		}
	}
	require.Equal(t, want, clear, "SECURITY.md's table of columns in the clear against the schema at head (What is not sealed): add what a migration adds in the clear, in the table's column order")
}
