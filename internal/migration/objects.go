package migration

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"slices"
	"strings"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/schema"
)

// Object is one entry of a database's schema (sqlite_master).
type Object struct {
	// Type is "table", "index", "view" or "trigger".
	Type string
	// Name is the object's name.
	Name string
	// Table is the table an index or trigger belongs to (a table's or
	// view's own name).
	Table string
}

// String names the object as errors and reports do: "trigger t on
// storage_key", "table x".
func (o Object) String() string {
	if o.Table == "" || o.Table == o.Name {
		return o.Type + " " + o.Name
	}
	return o.Type + " " + o.Name + " on " + o.Table
}

// sqliteOwn are the tables SQLite creates on its own (ANALYZE, PRAGMA
// optimize): statistics, never rows of the store's.
var sqliteOwn = []Object{
	{Type: "table", Name: "sqlite_stat1", Table: "sqlite_stat1"},
	{Type: "table", Name: "sqlite_stat4", Table: "sqlite_stat4"},
}

// UnknownObjects returns every object in the schema of the database behind
// conn that no version of m's directory defines (nor the schema_revision
// history, nor SQLite itself), except those in allow, sorted by type and
// name. What the directory defines is computed once per Migrator (Default
// returns one Migrator per process), by applying its files one by one to
// a private in-memory database of conn's driver and listing the objects
// after each (so an object of any version is known). It only reads conn.
func (m *Migrator) UnknownObjects(ctx context.Context, conn *sql.DB, allow ...Object) ([]Object, error) {
	known, err := m.defined(ctx, conn.Driver())
	if err != nil {
		return nil, err
	}
	rows, err := db.New(conn).ListSchemaObjects(ctx)
	if err != nil {
		return nil, fmt.Errorf("migration: read schema: %w", err)
	}
	var out []Object
	for _, r := range rows {
		o := Object{Type: r.Type, Name: r.Name, Table: r.TblName}
		if !known[o] && !slices.Contains(allow, o) && !slices.Contains(sqliteOwn, o) {
			out = append(out, o)
		}
	}
	return out, nil
}

// CheckObjects returns an error wrapping schema.ErrUnknownObject that names every
// object UnknownObjects finds, nil if there is none; or the error of
// reading the schema.
func (m *Migrator) CheckObjects(ctx context.Context, conn *sql.DB, allow ...Object) error {
	objs, err := m.UnknownObjects(ctx, conn, allow...)
	if err != nil || len(objs) == 0 {
		return err
	}
	names := make([]string, len(objs))
	for i, o := range objs {
		names[i] = o.String()
	}
	return fmt.Errorf("%w: %s", schema.ErrUnknownObject, strings.Join(names, ", "))
}

// defined returns the objects m's migrations define, building them with
// drv on the first call that succeeds.
func (m *Migrator) defined(ctx context.Context, drv driver.Driver) (map[Object]bool, error) {
	m.knownMu.Lock()
	defer m.knownMu.Unlock()
	if m.known != nil {
		return m.known, nil
	}
	mem := sql.OpenDB(memoryConnector{drv})
	defer mem.Close()
	mem.SetMaxOpenConns(1) // one in-memory database
	known := map[Object]bool{}
	list := func() error {
		rows, err := db.New(mem).ListSchemaObjects(ctx)
		if err != nil {
			return err
		}
		for _, r := range rows {
			known[Object{Type: r.Type, Name: r.Name, Table: r.TblName}] = true
		}
		return nil
	}
	if _, err := mem.ExecContext(ctx, schema.RevisionTable()); err != nil {
		return nil, fmt.Errorf("migration: build the defined schema: %w", err)
	}
	for _, f := range m.files {
		stmts, err := f.Stmts()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrDirectory, f.Name(), err)
		}
		for _, stmt := range stmts {
			if _, err := mem.ExecContext(ctx, stmt); err != nil {
				return nil, fmt.Errorf("migration: build the defined schema: %s: %w", f.Name(), err)
			}
		}
		if err := list(); err != nil {
			return nil, fmt.Errorf("migration: build the defined schema: %w", err)
		}
	}
	m.known = known
	return known, nil
}

// memoryConnector opens a private in-memory database with a driver.
type memoryConnector struct{ drv driver.Driver }

func (c memoryConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(":memory:") }
func (c memoryConnector) Driver() driver.Driver                        { return c.drv }
