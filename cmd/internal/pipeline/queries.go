package pipeline

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/mattn/go-sqlite3"
)

// Query is one query sqlc generated: its name and kind (":one",
// ":many", ":exec"...), the queries file it comes from, and its SQL as
// SQLite runs it (parameters as ?).
type Query struct {
	Name, Kind, Source, SQL string
}

// ReadQueries reads every query sqlc generated into the Go package in dir
// (its *.sql.go files): the string constants that start with sqlc's
// "-- name: Name :kind" line. queriesDir names the directory of the query
// files they were generated from, for Query.Source. The queries are
// sorted by source, then name. It returns an error if dir holds no sqlc
// output or a file does not parse.
func ReadQueries(dir, queriesDir string) ([]Query, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.sql.go"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no sqlc output (*.sql.go); run 'go -C cmd tool sqlc generate -f ../sqlc.yaml'", dir)
	}
	var out []Query
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return nil, err
		}
		source := queriesDir + "/" + strings.TrimSuffix(filepath.Base(path), ".go")
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				for _, v := range spec.(*ast.ValueSpec).Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil || !strings.HasPrefix(s, "-- name: ") {
						continue
					}
					head, body, _ := strings.Cut(s, "\n")
					f := strings.Fields(strings.TrimPrefix(head, "-- name: "))
					if len(f) != 2 {
						return nil, fmt.Errorf("%s: unexpected sqlc name line %q", path, head)
					}
					out = append(out, Query{Name: f[0], Kind: f[1], Source: source, SQL: strings.TrimSpace(body)})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Source != out[j].Source {
			return out[i].Source < out[j].Source
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// Explain returns SQLite's EXPLAIN QUERY PLAN of query as the sqlite3
// shell draws it. Parameters are left unbound (NULL): the plan does not
// depend on their values.
func Explain(ctx context.Context, conn *sql.DB, query string) ([]string, error) {
	c, err := conn.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	type row struct {
		id, parent int64
		detail     string
	}
	var rows []row
	err = c.Raw(func(dc any) error {
		sc, ok := dc.(*sqlite3.SQLiteConn)
		if !ok {
			return fmt.Errorf("unexpected driver connection %T", dc)
		}
		st, err := sc.Prepare("EXPLAIN QUERY PLAN " + query)
		if err != nil {
			return err
		}
		defer st.Close()
		rs, err := st.Query(make([]driver.Value, st.NumInput())) //nolint:staticcheck // the driver-level call is what exposes NumInput
		if err != nil {
			return err
		}
		defer rs.Close()
		vals := make([]driver.Value, 4)
		for {
			if err := rs.Next(vals); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			id, _ := vals[0].(int64)
			parent, _ := vals[1].(int64)
			detail, _ := vals[3].(string)
			rows = append(rows, row{id: id, parent: parent, detail: detail})
		}
	})
	if err != nil {
		return nil, err
	}
	depth := map[int64]int{0: -1}
	var out []string
	for _, r := range rows {
		d := depth[r.parent] + 1
		depth[r.id] = d
		out = append(out, strings.Repeat("   ", d)+r.detail)
	}
	return out, nil
}
