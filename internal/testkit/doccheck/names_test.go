package doccheck

import (
	"go/ast"
	"go/doc"
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

	"github.com/stretchr/testify/require"
)

// declared is what a package of the modules declares: its exported names
// (Ident, and Type.Member for each type's methods and fields) and, for
// each type, the types of the same package it embeds, whose members it
// promotes.
type declared struct {
	names  map[string]bool
	embeds map[string][]string
}

// has reports whether the package declares ident, and ident.member when
// member is given: a member of the type itself or promoted from a type it
// embeds.
func (d declared) has(ident, member string) bool {
	if !d.names[ident] {
		return false
	}
	return member == "" || d.promotes(ident, member, map[string]bool{})
}

// isMember reports whether name is a member of one of the package's
// types.
func (d declared) isMember(name string) bool {
	for n := range d.names {
		if strings.HasSuffix(n, "."+name) {
			return true
		}
	}
	return false
}

func (d declared) promotes(typ, member string, seen map[string]bool) bool {
	if d.names[typ+"."+member] {
		return true
	}
	if seen[typ] {
		return false
	}
	seen[typ] = true
	for _, e := range d.embeds[typ] {
		if d.promotes(e, member, seen) {
			return true
		}
	}
	return false
}

// exported adds to d the names the package in dir exports: its functions,
// types, variables and constants, and for each type Type.Member for its
// methods, struct fields and interface methods (embedded ones included).
func exported(t *testing.T, dir string, d declared) {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	require.NoError(t, err)
	for _, p := range pkgs {
		dp := doc.New(p, dir, 0)
		for _, f := range dp.Funcs {
			d.names[f.Name] = true
		}
		for _, v := range append(dp.Vars, dp.Consts...) {
			for _, n := range v.Names {
				d.names[n] = true
			}
		}
		for _, ty := range dp.Types {
			d.names[ty.Name] = true
			for _, f := range ty.Funcs {
				d.names[f.Name] = true
			}
			for _, m := range ty.Methods {
				d.names[ty.Name+"."+m.Name] = true
			}
			for _, v := range append(ty.Vars, ty.Consts...) {
				for _, n := range v.Names {
					d.names[n] = true
				}
			}
			ast.Inspect(ty.Decl, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.StructType:
					members(d, ty.Name, n.Fields)
				case *ast.InterfaceType:
					members(d, ty.Name, n.Methods)
				}
				return true
			})
		}
	}
}

func members(d declared, typ string, fields *ast.FieldList) {
	for _, f := range fields.List {
		for _, n := range f.Names {
			d.names[typ+"."+n.Name] = true
		}
		if len(f.Names) == 0 { // embedded: its name is the type's
			expr := f.Type
			if s, ok := expr.(*ast.StarExpr); ok {
				expr = s.X
			}
			switch e := expr.(type) {
			case *ast.Ident:
				d.names[typ+"."+e.Name] = true
				d.embeds[typ] = append(d.embeds[typ], e.Name)
			case *ast.SelectorExpr:
				d.names[typ+"."+e.Sel.Name] = true
			}
		}
	}
}

// resolver holds what a reference may name: the packages of both modules
// with what each declares, and the names of the other packages a document
// may qualify a name with (the standard library's and the dependencies').
type resolver struct {
	module map[string]declared
	other  map[string]bool
}

// newResolver reads the packages of both modules (see packages) and asks
// the go command for the standard library's and the dependencies' package
// names.
func newResolver(t *testing.T, root string) resolver {
	t.Helper()
	r := resolver{module: map[string]declared{}, other: map[string]bool{}}
	for name, dirs := range packages(t, root) {
		d := declared{names: map[string]bool{}, embeds: map[string][]string{}}
		for _, dir := range dirs {
			exported(t, filepath.Join(root, dir), d)
		}
		r.module[name] = d
	}
	for _, public := range []string{"client", "store", "sqlitestore", "memstore", "seal", "session", "transport", "transporttest", "schema"} {
		require.NotEmpty(t, r.module[public].names, "package %s exports nothing", public)
	}
	for _, c := range []struct{ dir, pattern string }{{".", "std"}, {".", "./..."}, {"cmd", "./..."}} {
		args := []string{"list", "-f", "{{.Name}}", c.pattern}
		if c.pattern != "std" {
			args = []string{"list", "-deps", "-test", "-f", "{{.Name}}", c.pattern}
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = filepath.Join(root, c.dir)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		require.NoError(t, err, "go %s in %s", strings.Join(args, " "), c.dir)
		for _, name := range strings.Fields(string(out)) {
			r.other[name] = true
		}
	}
	for _, dep := range []string{"errors", "sql", "sqlite3", "require", "migrate"} {
		require.True(t, r.other[dep], "go list names the package %s", dep)
	}
	return r
}

// A reference is pkg.Ident, pkg.Type.Member or pkg.(*Type).Member (a
// method expression), outside a file path or a host name (not preceded by
// a slash, a dot or a letter). A lower-case Ident is not one: it is a
// file's extension (main.go) or a column (session.sealed).
var reference = regexp.MustCompile(`(?:^|[^\w/.-])([a-z][a-z0-9]*)\.(?:\(\*?([A-Z]\w*)\)\.([A-Z]\w*)|([A-Z]\w*)(?:\.([A-Z]\w*))?)`)

// fileLike is what follows a file's or a host's name rather than a Go
// reference: an extension (notes.Old.txt), a path.
var fileLike = regexp.MustCompile(`^(?:\.[a-z]|[/-])`)

var testFunc = regexp.MustCompile(`^(Test|Benchmark|Example|Fuzz)[A-Z_]`)

type ref struct {
	pkg, ident, member string
	text               string // as written
	start, end         int    // of the text in what was scanned
}

func references(text string) []ref {
	var refs []ref
	for _, m := range reference.FindAllStringSubmatchIndex(text, -1) {
		r := ref{pkg: text[m[2]:m[3]], start: m[2], end: m[1]}
		r.text = text[r.start:r.end]
		if m[4] >= 0 { // pkg.(*Type).Member
			r.ident, r.member = text[m[4]:m[5]], text[m[6]:m[7]]
		} else {
			r.ident = text[m[8]:m[9]]
			if m[10] >= 0 {
				r.member = text[m[10]:m[11]]
			}
		}
		refs = append(refs, r)
	}
	return refs
}

// A finding is a stale reference and the line it is on, counted from 1.
type finding struct {
	line int
	name string
}

func (f finding) String() string { return strconv.Itoa(f.line) + ": " + f.name }

// scope says where in a text stale checks more than the references to
// the modules' packages.
type scope struct {
	// quoted are the spans (code spans, a comment's doc links) whose
	// qualifiers must be packages.
	quoted [][]int
	// transcripts are the spans (a document's fenced blocks other than
	// Go) that may name a method by its package alone.
	transcripts [][]int
}

func within(spans [][]int, offset int) bool {
	for _, s := range spans {
		if s[0] <= offset && offset < s[1] {
			return true
		}
	}
	return false
}

// stale returns the references in text that name what does not exist, and
// how many references to the modules' packages it checked:
//
//   - anywhere in text, a name a package of the modules does not declare.
//     A method or field is named with its type (sqlitestore.Store.RotateKey
//     or sqlitestore.(*Store).RotateKey), so that the name says which type
//     has it; only a transcript of a tool's output may name it by its
//     package alone, as the tool's labels do, and then one of the
//     package's types must have it;
//   - inside the quoted spans, a qualifier that is no package at all: not
//     one of the modules', the standard library's or the dependencies' (a
//     package since removed or merged). A one-letter qualifier is a
//     variable (u.PendingMessage) and one followed by an extension or a
//     path is a file or a host.
func (r resolver) stale(text string, in scope) (missing []finding, checked int) {
	line := func(offset int) int { return 1 + strings.Count(text[:offset], "\n") }
	for _, x := range references(text) {
		d, ok := r.module[x.pkg]
		if !ok {
			continue
		}
		checked++
		if x.member == "" && testFunc.MatchString(x.ident) {
			continue // a test's name, not the package's API
		}
		if d.has(x.ident, x.member) || x.member == "" && within(in.transcripts, x.start) && d.isMember(x.ident) {
			continue
		}
		missing = append(missing, finding{line(x.start), x.text})
	}
	for _, span := range in.quoted {
		code := text[span[0]:span[1]]
		for _, x := range references(code) {
			if _, ok := r.module[x.pkg]; ok || r.other[x.pkg] || len(x.pkg) == 1 || fileLike.MatchString(code[x.end:]) {
				continue
			}
			missing = append(missing, finding{line(span[0] + x.start), x.text + " (no package " + x.pkg + ")"})
		}
	}
	sort.SliceStable(missing, func(i, j int) bool { return missing[i].line < missing[j].line })
	return missing, checked
}

var (
	// fence is a fenced block and its language: Go blocks compile
	// (TestGoBlocksCompile), and the others are commands, SQL or a tool's
	// output, whose variables and aliases are no package.
	fence    = regexp.MustCompile("(?ms)^[ \t]*```(\\w*).*?^[ \t]*```[^\n]*$")
	codeSpan = regexp.MustCompile("`[^`]+`")
)

// documentScope returns a Markdown document's code spans outside its
// fenced blocks (a span may run over a line break), and its fenced blocks
// other than Go.
func documentScope(text string) scope {
	var in scope
	prose := []byte(text)
	for _, m := range fence.FindAllStringSubmatchIndex(text, -1) {
		for i := m[0]; i < m[1]; i++ {
			if prose[i] != '\n' {
				prose[i] = ' ' // byte for byte, so that offsets hold in text
			}
		}
		if text[m[2]:m[3]] != "go" {
			in.transcripts = append(in.transcripts, m[:2])
		}
	}
	in.quoted = codeSpan.FindAllIndex(prose, -1)
	return in
}

// docLink is a doc comment's link to another package's name,
// [store.DeviceAddress] (not an index expression, rows[m.ID]).
var docLink = regexp.MustCompile(`(?:^|[^\w\]])(\[[a-z][a-z0-9]*\.[^\]\s]+\])`)

// commentScope returns a comment's doc links and code spans.
func commentScope(text string) scope {
	var in scope
	in.quoted = codeSpan.FindAllStringIndex(text, -1)
	for _, m := range docLink.FindAllStringSubmatchIndex(text, -1) {
		in.quoted = append(in.quoted, m[2:4])
	}
	return in
}

// staleInDocument checks a Markdown document's text.
func (r resolver) staleInDocument(text string) ([]finding, int) {
	return r.stale(text, documentScope(text))
}

// TestDocumentsNameOnlyWhatExists: every pkg.Ident or pkg.Type.Member the
// documents name is declared by that package, and every qualifier in
// their code spans is a package (a name the code no longer has is a
// document gone stale).
func TestDocumentsNameOnlyWhatExists(t *testing.T) {
	root := repoRoot(t)
	r := newResolver(t, root)
	checked := 0
	var missing []string
	for _, docPath := range documents(t, root) {
		require.False(t, strings.HasPrefix(docPath, "fixtures/"), "the frozen fixtures' documents are history")
		b, err := os.ReadFile(filepath.Join(root, docPath))
		require.NoError(t, err)
		m, n := r.staleInDocument(string(b))
		checked += n
		for _, f := range m {
			missing = append(missing, docPath+":"+f.String())
		}
	}
	require.Empty(t, missing, "the documents name what does not exist")
	require.Greater(t, checked, 50, "the documents name the API: a scan that finds few references is broken")
}

// TestCommentsNameOnlyWhatExists: the comments of both modules' Go files
// (what go doc shows, and what a maintainer reads) name only what exists,
// as the documents do. Generated code is left out.
func TestCommentsNameOnlyWhatExists(t *testing.T) {
	root := repoRoot(t)
	r := newResolver(t, root)
	checked := 0
	var missing []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		for _, g := range f.Comments {
			for _, c := range g.List {
				m, n := r.stale(c.Text, commentScope(c.Text))
				checked += n
				for _, s := range m {
					missing = append(missing, rel+":"+strconv.Itoa(fset.Position(c.Pos()).Line+s.line-1)+": "+s.name)
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	sort.Strings(missing)
	require.Empty(t, missing, "comments name what the package does not declare")
	require.Greater(t, checked, 200, "the comments name the API: a scan that finds few references is broken")
}

// TestStaleReferences: what the check flags in a document and what it
// lets pass, against a small made-up module.
func TestStaleReferences(t *testing.T) {
	d := func(names ...string) declared {
		out := declared{names: map[string]bool{}, embeds: map[string][]string{}}
		for _, n := range names {
			if typ, embedded, ok := strings.Cut(n, ">"); ok {
				out.embeds[typ] = append(out.embeds[typ], embedded)
				n = typ + "." + embedded
			}
			out.names[n] = true
		}
		return out
	}
	r := resolver{
		module: map[string]declared{
			"store":       d("Store", "Store.Close", "DeviceAddress", "DeviceAddress.Validate", "ErrInUse", "PendingMessage", "PendingMessage.Sequence", "Unreadable", "Unreadable>PendingMessage", "Unreadable.Cause"),
			"sqlitestore": d("Open", "Store", "Store.RotateKey"),
		},
		other: map[string]bool{"errors": true, "sql": true, "sqlite3": true, "fs": true},
	}
	for _, c := range []struct {
		doc  string
		want []string // "line: name"
	}{
		// Names the module declares.
		{"`store.DeviceAddress` and `store.DeviceAddress.Validate`", nil},
		{"`sqlitestore.Store.RotateKey` rotates", nil},
		{"`sqlitestore.(*Store).RotateKey(ctx, key, 0, nil)`", nil},
		{"`store.Unreadable.Sequence`, promoted from the embedded PendingMessage", nil},
		{"store.ErrInUse in prose, *store.Store, [store.Store]", nil},
		{"`store.TestOpen` is a test", nil},
		{"`errors.Is(err, store.ErrInUse)`, `sql.DB`, `sqlite3.Error`, `fs.ErrPermission`", nil},
		// Not Go references: files, paths, hosts, columns, variables.
		{"`main.go`, `atlas.sum`, `sqlite_master.sql`, `schema_revision.sql`, `session.sealed`", nil},
		{"`ariga.io/atlas/sql/migrate`, `notes.Old.txt`, `docs.Guide/x`", nil},
		{"`AbandonPendingMessage(ctx, u.PendingMessage)`, `PinDiscarded(e.Pinned)`", nil},
		{"```go\nx := page.Messages\n```", nil},
		{"```sh\nrows.Next\n```", nil},
		// A tool's output names a method as the tool's labels do.
		{"```text\nrotate (sqlitestore.RotateKey)   1.02x\n```", nil},

		// Names the module does not declare.
		{"`store.Bogus`", []string{"1: store.Bogus"}},
		{"store.Bogus in prose", []string{"1: store.Bogus"}},
		{"`store.Store.Bogus`", []string{"1: store.Store.Bogus"}},
		{"`store.ErrInUse.Error`", []string{"1: store.ErrInUse.Error"}},
		{"`store.Unreadable.Bogus`", []string{"1: store.Unreadable.Bogus"}},
		{"`store.Bogus.Close`", []string{"1: store.Bogus.Close"}},
		{"a method by its package alone: `sqlitestore.RotateKey`", []string{"1: sqlitestore.RotateKey"}},
		{"sqlitestore.RotateKey in prose", []string{"1: sqlitestore.RotateKey"}},
		{"```go\n// sqlitestore.RotateKey\n```", []string{"2: sqlitestore.RotateKey"}},
		{"```text\nrotate (sqlitestore.Rotate)\n```", []string{"2: sqlitestore.Rotate"}},
		{"`sqlitestore.(*Store).Rotate(ctx)`", []string{"1: sqlitestore.(*Store).Rotate"}},
		{"`sqlitestore.(Open).RotateKey`", []string{"1: sqlitestore.(Open).RotateKey"}},
		{"```text\nabandon (store.Store.Abandon)\n```", []string{"2: store.Store.Abandon"}},
		// Packages that are none of the module's, the standard library's
		// or the dependencies'.
		{"`ids.DeviceAddress`", []string{"1: ids.DeviceAddress (no package ids)"}},
		{"`rowseal.Page`", []string{"1: rowseal.Page (no package rowseal)"}},
		{"`rowseal.Page.Open`", []string{"1: rowseal.Page.Open (no package rowseal)"}},
		{"`rowseal.(*Sealer).Seal`", []string{"1: rowseal.(*Sealer).Seal (no package rowseal)"}},
		{"`page.Messages`", []string{"1: page.Messages (no package page)"}},
		{"one\n`errors.Is(err,\nids.ErrInvalid)`", []string{"3: ids.ErrInvalid (no package ids)"}},
		{"```sh\nx\n```\nthen `ids.DeviceAddress`", []string{"4: ids.DeviceAddress (no package ids)"}},
		{"```text\n2µs vs 1µs, µ\n```\n`ids.DeviceAddress`", []string{"4: ids.DeviceAddress (no package ids)"}},
		{"```text\nµ `x\n```\n`ids.DeviceAddress` `y`", []string{"4: ids.DeviceAddress (no package ids)"}},
	} {
		t.Run(c.doc, func(t *testing.T) {
			m, _ := r.staleInDocument(c.doc)
			var got []string
			for _, f := range m {
				got = append(got, f.String())
			}
			require.Equal(t, c.want, got)
		})
	}
	for _, c := range []struct {
		comment string
		want    []string
	}{
		{"// Open returns a [store.Store]; rows[msg.ID] holds it, keyed by `p.ID`.", nil},
		{"// See sqlitestore.Store.RotateKey, errors.Is and page.Messages.", nil},
		{"// See sqlitestore.RotateKey.", []string{"1: sqlitestore.RotateKey"}},
		{"// Open returns a [rowseal.Page].", []string{"1: rowseal.Page (no package rowseal)"}},
		{"// Open returns a `rowseal.Page`.", []string{"1: rowseal.Page (no package rowseal)"}},
		{"/* Open\n   uses sqlitestore.RotateKey */", []string{"2: sqlitestore.RotateKey"}},
	} {
		t.Run(c.comment, func(t *testing.T) {
			m, _ := r.stale(c.comment, commentScope(c.comment))
			var got []string
			for _, f := range m {
				got = append(got, f.String())
			}
			require.Equal(t, c.want, got)
		})
	}
}

// TestStaleReferencesAgainstTheModules: the names of packages since
// removed are flagged against the modules as they are, and the forms of a
// method's name resolve.
func TestStaleReferencesAgainstTheModules(t *testing.T) {
	r := newResolver(t, repoRoot(t))
	for _, c := range []struct {
		doc   string
		stale bool
	}{
		{"`store.DeviceAddress.Validate`", false},
		{"`sqlitestore.Store.RotateKey`", false},
		{"`sqlitestore.(*Store).RotateKey(ctx, newKey, batch, progress)`", false},
		{"`client.Client.AbandonPendingMessage`", false},
		{"`errors.Is`, `sql.DB`, `sqlite3.Error`, `migrate.HashFileName`, `slog.LogValuer`", false},
		{"`ids.DeviceAddress`", true},
		{"`rowseal.Page`", true},
		{"`sqlitestore.RotateKey`", true},
		{"`client.AbandonPendingMessage`", true},
		{"`sqlitestore.(*Store).Bogus`", true},
	} {
		t.Run(c.doc, func(t *testing.T) {
			m, _ := r.staleInDocument(c.doc)
			require.Equal(t, c.stale, len(m) > 0, "%v", m)
		})
	}
}
