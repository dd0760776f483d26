package main

import (
	"errors"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSentinelsInErrorsGo checks that every package of the cmd module
// declares its sentinel errors (a package-level errors.New or fmt.Errorf)
// in its errors.go, where a reader looks for what a package can return.
// A sentinel only some platforms build stays in its build-constrained
// file when its package has no errors.go.
func TestSentinelsInErrorsGo(t *testing.T) {
	root := ".."
	var misplaced []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || d.Name() == "errors.go" {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		_, statErr := os.Stat(filepath.Join(filepath.Dir(path), "errors.go"))
		if constrained(f) && errors.Is(statErr, fs.ErrNotExist) {
			return nil
		}
		for _, name := range sentinels(f) {
			misplaced = append(misplaced, filepath.ToSlash(path)+": "+name)
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, misplaced, "sentinel errors outside their package's errors.go")
}

// constrained reports whether f has a //go:build line.
func constrained(f *ast.File) bool {
	for _, g := range f.Comments {
		if g.Pos() > f.Package {
			break
		}
		for _, c := range g.List {
			if constraint.IsGoBuild(c.Text) {
				return true
			}
		}
	}
	return false
}

// sentinels returns the names of f's package-level variables whose value
// is a call to errors.New or fmt.Errorf.
func sentinels(f *ast.File) []string {
	var out []string
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, v := range vs.Values {
				call, ok := v.(*ast.CallExpr)
				if !ok {
					continue
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					continue
				}
				pkg, ok := sel.X.(*ast.Ident)
				if ok && (pkg.Name == "errors" && sel.Sel.Name == "New" || pkg.Name == "fmt" && sel.Sel.Name == "Errorf") {
					out = append(out, vs.Names[i].Name)
				}
			}
		}
	}
	return out
}
