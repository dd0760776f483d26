package linkcheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/securemsg/storage"

// pkg is one parsed package an application links.
type pkg struct {
	path  string
	files map[string]*ast.File // by path relative to the module root
	types map[string]*ast.TypeSpec
	// imports maps each type to its file's imports (local name -> path).
	imports map[string]map[string]string
	// methods maps a type to its methods' names, each true if the
	// receiver is a pointer.
	methods map[string]map[string]bool
}

// linked parses every non-test Go file of the packages an application
// links: every package of the root module but cmd (its own module),
// examples, reliability, fixtures, internal/testkit and the xxxtest
// packages.
func linked(t *testing.T) map[string]*pkg {
	t.Helper()
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	fset := token.NewFileSet()
	pkgs := map[string]*pkg{}
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			base := d.Name()
			switch {
			case rel == ".":
				return nil
			case strings.HasPrefix(base, ".") || base == "testdata" || strings.HasSuffix(base, "test"),
				rel == "cmd", rel == "examples", rel == "reliability", rel == "fixtures", rel == "internal/testkit":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			return nil
		}
		ip := module
		if dir := filepath.ToSlash(filepath.Dir(rel)); dir != "." {
			ip += "/" + dir
		}
		k := pkgs[ip]
		if k == nil {
			k = &pkg{path: ip, files: map[string]*ast.File{}, types: map[string]*ast.TypeSpec{},
				imports: map[string]map[string]string{}, methods: map[string]map[string]bool{}}
			pkgs[ip] = k
		}
		k.files[rel] = f
		imports := map[string]string{}
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			name := path[strings.LastIndex(path, "/")+1:]
			if im.Name != nil {
				name = im.Name.Name
			}
			imports[name] = path
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok {
						k.types[ts.Name.Name] = ts
						k.imports[ts.Name.Name] = imports
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil || len(d.Recv.List) != 1 {
					continue
				}
				rt, ptr := d.Recv.List[0].Type, false
				if s, ok := rt.(*ast.StarExpr); ok {
					rt, ptr = s.X, true
				}
				if id, ok := rt.(*ast.Ident); ok {
					if k.methods[id.Name] == nil {
						k.methods[id.Name] = map[string]bool{}
					}
					k.methods[id.Name][d.Name.Name] = ptr
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, pkgs, module+"/session", "the walk found the packages")
	return pkgs
}

// keyTypes are the types outside the module that hold private keys.
var keyTypes = map[string]bool{
	"crypto/ed25519.PrivateKey": true,
	"crypto/ecdh.PrivateKey":    true,
}

// secretName is the name of a byte field that holds a secret: a key, a
// seed, or a serialized session or initiation.
var secretName = regexp.MustCompile(`(?i)secret|priv|seed|^session$|^initiation$`)

// redacting are the methods a type holding secrets has, on a value
// receiver (both the value and a pointer to it print redacted), or on a
// pointer for a type holding a lock (never copied): every fmt verb
// (Format), slog (LogValue), and the two encoders that would walk it.
var redacting = []string{"Format", "LogValue", "MarshalJSON", "GobEncode"}

type checker struct {
	pkgs   map[string]*pkg
	secret map[string]bool // by "path.Name"; computed to a fixpoint
}

// named returns the "path.Name" a type expression names, or "".
func (c *checker) named(e ast.Expr, k *pkg, typ string) string {
	switch e := e.(type) {
	case *ast.Ident:
		if _, ok := k.types[e.Name]; ok {
			return k.path + "." + e.Name
		}
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok {
			return k.imports[typ][x.Name] + "." + e.Sel.Name
		}
	}
	return ""
}

// reaches reports whether a value of type e holds a secret.
func (c *checker) reaches(e ast.Expr, k *pkg, typ string) bool {
	switch e := e.(type) {
	case *ast.StarExpr:
		return c.reaches(e.X, k, typ)
	case *ast.ArrayType:
		return c.reaches(e.Elt, k, typ)
	case *ast.MapType:
		return c.reaches(e.Key, k, typ) || c.reaches(e.Value, k, typ)
	case *ast.ChanType:
		return c.reaches(e.Value, k, typ)
	case *ast.StructType:
		for _, f := range e.Fields.List {
			if c.fieldSecret(f, k, typ) {
				return true
			}
		}
	case *ast.IndexExpr:
		return c.reaches(e.X, k, typ)
	}
	n := c.named(e, k, typ)
	return keyTypes[n] || c.secret[n]
}

func isBytes(e ast.Expr) bool {
	a, ok := e.(*ast.ArrayType)
	if !ok {
		return false
	}
	id, ok := a.Elt.(*ast.Ident)
	return ok && (id.Name == "byte" || id.Name == "uint8")
}

func (c *checker) fieldSecret(f *ast.Field, k *pkg, typ string) bool {
	if c.reaches(f.Type, k, typ) {
		return true
	}
	if isBytes(f.Type) {
		for _, n := range f.Names {
			if secretName.MatchString(n.Name) {
				return true
			}
		}
	}
	return false
}

func (c *checker) solve() {
	c.secret = map[string]bool{}
	for changed := true; changed; {
		changed = false
		for _, k := range c.pkgs {
			for name, ts := range k.types {
				full := k.path + "." + name
				if !c.secret[full] && c.reaches(ts.Type, k, name) {
					c.secret[full], changed = true, true
				}
			}
		}
	}
}

// redacts reports whether the type named full has the redacting methods.
func (c *checker) redacts(full string) bool {
	i := strings.LastIndex(full, ".")
	k := c.pkgs[full[:i]]
	if k == nil {
		return false
	}
	name := full[i+1:]
	locked := false
	if st, ok := k.types[name].Type.(*ast.StructType); ok {
		for _, f := range st.Fields.List {
			n := c.named(f.Type, k, name)
			locked = locked || n == "sync.Mutex" || n == "sync.RWMutex"
		}
	}
	for _, m := range redacting {
		ptr, ok := k.methods[name][m]
		if !ok || (ptr && !locked) {
			return false
		}
	}
	return true
}

// delegates reports whether every secret field of the struct st is
// exported and of a type (or a pointer to one) that redacts itself: fmt
// calls an exported field's Format, and the encoders its methods.
func (c *checker) delegates(st *ast.StructType, k *pkg, typ string) bool {
	for _, f := range st.Fields.List {
		if !c.fieldSecret(f, k, typ) {
			continue
		}
		e := f.Type
		if s, ok := e.(*ast.StarExpr); ok {
			e = s.X
		}
		n := c.named(e, k, typ)
		if n == "" || !c.redacts(n) {
			return false
		}
		names := f.Names
		if len(names) == 0 { // embedded: promoted methods would print it alone
			return false
		}
		for _, id := range names {
			if !id.IsExported() {
				return false
			}
		}
	}
	return true
}

// Every exported type of a linked package that holds key material (a
// private key of crypto/ed25519 or crypto/ecdh, a byte field named as a
// secret, a seed or a serialized session, or a type holding one) redacts
// itself under fmt, slog, encoding/json and gob, or holds its secrets
// only in exported fields of types that do. A new type with such a field
// fails here until it has the methods. seal.Key and seal.Keyring hold
// their bytes behind an untyped pointer, which fmt never follows, and
// redact themselves (package seal's tests).
func TestSecretTypesRedact(t *testing.T) {
	c := &checker{pkgs: linked(t)}
	c.solve()
	var found, missing []string
	for _, k := range c.pkgs {
		for name, ts := range k.types {
			full := k.path + "." + name
			if !ast.IsExported(name) || !c.secret[full] {
				continue
			}
			found = append(found, strings.TrimPrefix(full, module+"/"))
			st, isStruct := ts.Type.(*ast.StructType)
			if c.redacts(full) || (isStruct && c.delegates(st, k, name)) {
				continue
			}
			missing = append(missing, strings.TrimPrefix(full, module+"/"))
		}
	}
	sort.Strings(found)
	sort.Strings(missing)
	t.Logf("types holding secrets: %v", found)
	for _, want := range []string{"session.Identity", "session.Prekeys", "session.Session", "session.Receipt",
		"store.LocalIdentity", "store.PeerState", "client.Client"} {
		require.Contains(t, found, want, "the check finds the known holders")
	}
	require.Empty(t, missing, "exported types holding secrets without %v", redacting)
}
