package linkcheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// seams are the test seams an application still links, by file: init
// functions and package-level variables that hold a hook or test state
// (see TestNoTestSeams), each listed so that no other can be added. There
// are none: a test that must watch or stop what a store does wraps what
// the store is given (internal/testkit/sealspy).
var seams = map[string][]string{}

// atomicTypes are the sync/atomic types: a package-level one is a counter
// or a flag shared by every caller, the state a test reads or sets.
var atomicTypes = map[string]bool{
	"Bool": true, "Int32": true, "Int64": true, "Uint32": true, "Uint64": true, "Uintptr": true,
	"Pointer": true, "Value": true,
}

// seamChecker tells a package-level variable that holds a hook or test
// state, by its declared type or the type of its value.
type seamChecker struct {
	pkgs map[string]*pkg
}

// holdsFunc reports whether a value of type e holds a func: a func type,
// a pointer, array, slice, map or channel of one, or a struct (or a named
// type of a linked package) with such a field. seen guards against
// recursive types.
func (c *seamChecker) holdsFunc(e ast.Expr, k *pkg, imports map[string]string, seen map[string]bool) bool {
	switch e := e.(type) {
	case *ast.FuncType:
		return true
	case *ast.ParenExpr:
		return c.holdsFunc(e.X, k, imports, seen)
	case *ast.StarExpr:
		return c.holdsFunc(e.X, k, imports, seen)
	case *ast.ArrayType:
		return c.holdsFunc(e.Elt, k, imports, seen)
	case *ast.MapType:
		return c.holdsFunc(e.Key, k, imports, seen) || c.holdsFunc(e.Value, k, imports, seen)
	case *ast.ChanType:
		return c.holdsFunc(e.Value, k, imports, seen)
	case *ast.StructType:
		for _, f := range e.Fields.List {
			if c.holdsFunc(f.Type, k, imports, seen) {
				return true
			}
		}
		return false
	case *ast.IndexExpr: // a generic type: its type argument may be a func
		return c.holdsFunc(e.X, k, imports, seen) || c.holdsFunc(e.Index, k, imports, seen)
	case *ast.IndexListExpr:
		for _, x := range append([]ast.Expr{e.X}, e.Indices...) {
			if c.holdsFunc(x, k, imports, seen) {
				return true
			}
		}
		return false
	}
	tk, name := c.resolve(e, k, imports)
	if tk == nil || seen[tk.path+"."+name] {
		return false
	}
	seen[tk.path+"."+name] = true
	return c.holdsFunc(tk.types[name].Type, tk, tk.imports[name], seen)
}

// resolve returns the linked package and name of the type e names, or
// nil for a type outside the linked packages.
func (c *seamChecker) resolve(e ast.Expr, k *pkg, imports map[string]string) (*pkg, string) {
	switch e := e.(type) {
	case *ast.Ident:
		if _, ok := k.types[e.Name]; ok {
			return k, e.Name
		}
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok {
			if tk := c.pkgs[imports[x.Name]]; tk != nil {
				if _, ok := tk.types[e.Sel.Name]; ok {
					return tk, e.Sel.Name
				}
			}
		}
	}
	return nil, ""
}

// isAtomic reports whether e names a sync/atomic type.
func isAtomic(e ast.Expr, imports map[string]string) bool {
	switch x := e.(type) {
	case *ast.IndexExpr: // atomic.Pointer[T]
		e = x.X
	case *ast.StarExpr:
		e = x.X
	}
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && imports[id.Name] == "sync/atomic" && atomicTypes[sel.Sel.Name]
}

// hookType reports whether a package-level variable of type e holds a
// hook or test state: a type holding a func (see holdsFunc) or a
// sync/atomic value. A table (an array or slice, of entries that may hold
// funcs: the parts of a peer's state, the sealed tables) is fixed data,
// not a hook.
func (c *seamChecker) hookType(e ast.Expr, k *pkg, imports map[string]string) bool {
	if _, table := e.(*ast.ArrayType); table {
		return false
	}
	if tk, name := c.resolve(e, k, imports); tk != nil {
		if _, table := tk.types[name].Type.(*ast.ArrayType); table {
			return false
		}
	}
	return c.holdsFunc(e, k, imports, map[string]bool{}) || isAtomic(e, imports)
}

// seam reports whether the package-level variable declared with type
// typ (nil if none) and value (nil if none) holds a hook or test state:
// a func (declared, a func literal, or one of the package's functions),
// or a value of a hook type (see hookType).
func (c *seamChecker) seam(typ, value ast.Expr, k *pkg, imports map[string]string) bool {
	if typ != nil {
		return c.hookType(typ, k, imports)
	}
	if u, ok := value.(*ast.UnaryExpr); ok && u.Op == token.AND {
		value = u.X
	}
	switch v := value.(type) {
	case *ast.FuncLit:
		return true
	case *ast.CompositeLit:
		return v.Type != nil && c.hookType(v.Type, k, imports)
	case *ast.Ident: // var hook = someFunc
		for _, file := range k.files {
			for _, d := range file.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == v.Name {
					return true
				}
			}
		}
	case *ast.CallExpr: // var counter = new(atomic.Int64)
		if id, ok := v.Fun.(*ast.Ident); ok && id.Name == "new" && len(v.Args) == 1 {
			return c.hookType(v.Args[0], k, imports)
		}
	}
	return false
}

// fileImports maps f's imports' local names to their paths.
func fileImports(f *ast.File) map[string]string {
	imports := map[string]string{}
	for _, im := range f.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		name := path[strings.LastIndex(path, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = path
	}
	return imports
}

// seamsOf returns the seams of the packages, by file.
func seamsOf(pkgs map[string]*pkg) map[string][]string {
	c := &seamChecker{pkgs: pkgs}
	got := map[string][]string{}
	for _, k := range pkgs {
		for rel, f := range k.files {
			imports := fileImports(f)
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if d.Recv == nil && d.Name.Name == "init" {
						got[rel] = append(got[rel], "init")
					}
				case *ast.GenDecl:
					if d.Tok != token.VAR {
						continue
					}
					for _, s := range d.Specs {
						vs := s.(*ast.ValueSpec)
						for i, n := range vs.Names {
							var value ast.Expr
							if i < len(vs.Values) {
								value = vs.Values[i]
							}
							if n.Name != "_" && c.seam(vs.Type, value, k, imports) {
								got[rel] = append(got[rel], n.Name)
							}
						}
					}
				}
			}
		}
	}
	return got
}

// No file of a linked package declares an init function (a registration
// a test relies on) or a package-level variable holding a hook or test
// state: a func (a hook a test sets), a value of a type with a func field
// (a registry of accessors), or a sync/atomic value (a counter a test
// reads), but the seams listed.
func TestNoTestSeams(t *testing.T) {
	require.Equal(t, seams, seamsOf(linked(t)), "init functions and package variables holding hooks or test state in what an application links")
}

// parsed returns the packages of srcs (file name -> source; the package
// is the file's directory under the module), as linked would.
func parsed(t *testing.T, srcs map[string]string) map[string]*pkg {
	t.Helper()
	fset := token.NewFileSet()
	pkgs := map[string]*pkg{}
	for rel, src := range srcs {
		f, err := parser.ParseFile(fset, rel, src, parser.SkipObjectResolution)
		require.NoError(t, err, rel)
		ip := module + "/" + rel[:strings.LastIndex(rel, "/")]
		k := pkgs[ip]
		if k == nil {
			k = &pkg{path: ip, files: map[string]*ast.File{}, types: map[string]*ast.TypeSpec{}, imports: map[string]map[string]string{}}
			pkgs[ip] = k
		}
		k.files[rel] = f
		for _, d := range f.Decls {
			if gd, ok := d.(*ast.GenDecl); ok {
				for _, s := range gd.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok {
						k.types[ts.Name.Name] = ts
						k.imports[ts.Name.Name] = fileImports(f)
					}
				}
			}
		}
	}
	return pkgs
}

// The check finds every kind of seam, and none in what is no seam: the
// errors, tables, locks and pools a package declares.
func TestSeamsFound(t *testing.T) {
	const other = `package b

type Registry struct{ Open func() int }
type Plain struct{ N int }
type Option func(*Plain)
`
	for _, tc := range []struct {
		name string
		src  string
		want []string
	}{
		{"init", "func init() {}", []string{"init"}},
		{"method init is no seam", "type T struct{}\nfunc (T) init() {}", nil},
		{"func-typed variable", "var hook func()", []string{"hook"}},
		{"func literal", "var hook = func() {}", []string{"hook"}},
		{"one of the package's functions", "func f() {}\nvar hook = f", []string{"hook"}},
		{"named func type of another package", `import "github.com/securemsg/storage/b"` + "\nvar opt b.Option", []string{"opt"}},
		{"registry struct of another package", `import "github.com/securemsg/storage/b"` + "\nvar registered b.Registry", []string{"registered"}},
		{"pointer to a registry", `import "github.com/securemsg/storage/b"` + "\nvar registered = &b.Registry{}", []string{"registered"}},
		{"inline struct of funcs", "var accessors struct{ db func() any }", []string{"accessors"}},
		{"map of funcs", "var byName = map[string]func(){}", []string{"byName"}},
		{"atomic counter", `import "sync/atomic"` + "\nvar opens atomic.Int64", []string{"opens"}},
		{"atomic pointer", `import "sync/atomic"` + "\nvar next atomic.Pointer[int]", []string{"next"}},
		{"new atomic", `import "sync/atomic"` + "\nvar opens = new(atomic.Int64)", []string{"opens"}},
		{"only the seam of a group", "var (\n\ta, hook = 1, func() {}\n\tb int\n)", []string{"hook"}},
		{"errors", `import "errors"` + "\nvar ErrX = errors.New(\"x\")", nil},
		{"a table of entries holding funcs", `import "github.com/securemsg/storage/b"` + "\nvar parts = [...]b.Registry{{Open: nil}}", nil},
		{"a slice table", "type entry struct{ walk func() }\nvar tables = []entry{{}}", nil},
		{"struct without funcs", `import "github.com/securemsg/storage/b"` + "\nvar p b.Plain", nil},
		{"locks and pools of the standard library", `import "sync"` + "\nvar mu sync.Mutex\nvar pool = sync.Pool{New: nil}", nil},
		{"blank", "var _ = func() {}", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := seamsOf(parsed(t, map[string]string{"a/a.go": "package a\n" + tc.src, "b/b.go": other}))
			want := map[string][]string{}
			if tc.want != nil {
				want["a/a.go"] = tc.want
			}
			require.Equal(t, want, got)
		})
	}
}

// counterTypes are the sync/atomic types a counter is kept in.
var counterTypes = map[string]bool{"Int32": true, "Int64": true, "Uint32": true, "Uint64": true}

// unreadCounters returns the atomic counter fields of the packages'
// struct types ("file: Type.field") that no code of their package reads
// (calls Load, Swap or CompareAndSwap on): a count kept for tests, which
// would read it from outside.
func unreadCounters(pkgs map[string]*pkg) []string {
	var out []string
	for _, k := range pkgs {
		read := map[string]bool{}
		for _, f := range k.files {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				m, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || (m.Sel.Name != "Load" && m.Sel.Name != "Swap" && m.Sel.Name != "CompareAndSwap") {
					return true
				}
				switch x := m.X.(type) {
				case *ast.SelectorExpr:
					read[x.Sel.Name] = true
				case *ast.Ident:
					read[x.Name] = true
				}
				return true
			})
		}
		for rel, f := range k.files {
			imports := fileImports(f)
			for _, d := range f.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok {
					continue
				}
				for _, s := range gd.Specs {
					ts, ok := s.(*ast.TypeSpec)
					if !ok {
						continue
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						continue
					}
					for _, fl := range st.Fields.List {
						sel, ok := fl.Type.(*ast.SelectorExpr)
						if !ok || !isAtomic(sel, imports) || !counterTypes[sel.Sel.Name] {
							continue
						}
						for _, n := range fl.Names {
							if !read[n.Name] {
								out = append(out, rel+": "+ts.Name.Name+"."+n.Name)
							}
						}
					}
				}
			}
		}
	}
	return out
}

// No struct of a linked package keeps a counter its own code never reads:
// a test that counts wraps what the code is given.
func TestNoTestCounters(t *testing.T) {
	require.Empty(t, unreadCounters(linked(t)), "atomic counters that only something outside their package reads")
}

func TestUnreadCountersFound(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want []string
	}{
		{"a counter only incremented", "type K struct{ opens atomic.Int64 }\nfunc (k *K) Open() { k.opens.Add(1) }", []string{"a/a.go: K.opens"}},
		{"a counter read", "type C struct{ opened atomic.Uint64 }\nfunc (c *C) Fresh() bool { c.opened.Add(1); return c.opened.Load() > 1 }", nil},
		{"a flag is no counter", "type S struct{ closed atomic.Bool }", nil},
		{"a plain field", "type S struct{ n int64 }", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := unreadCounters(parsed(t, map[string]string{"a/a.go": "package a\nimport \"sync/atomic\"\n" + tc.src}))
			require.Equal(t, tc.want, got)
		})
	}
}
