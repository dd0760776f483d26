package migration

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/sqltx"
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
// storage_key", "table x". Names are escaped (Escape).
func (o Object) String() string {
	if o.Table == "" || o.Table == o.Name {
		return o.Type + " " + Escape(o.Name)
	}
	return o.Type + " " + Escape(o.Name) + " on " + Escape(o.Table)
}

// DifferenceKind says how an object differs from the migrations.
type DifferenceKind string

const (
	// Unknown: the database holds an object the migrations do not define
	// at its version (schema.ErrUnknownObject).
	Unknown DifferenceKind = "unknown"
	// Missing: the migrations define an object the database lacks
	// (schema.ErrSchemaMismatch).
	Missing DifferenceKind = "missing"
	// Changed: the database's object of a defined type and name has
	// another definition (schema.ErrSchemaMismatch).
	Changed DifferenceKind = "changed"
	// Structure: the database's table or index has no b-tree of its own
	// (a root page another object's b-tree starts at, or none), whatever
	// its definition (schema.ErrSchemaMismatch).
	Structure DifferenceKind = "structure"
)

// Difference is one way a database's schema departs from what the
// migrations define at its version.
type Difference struct {
	// Object is the object as the database holds it (as the migrations
	// define it, for a missing one).
	Object Object
	Kind   DifferenceKind
	// Details say what differs in a changed object, one line each:
	// "column recipient_user_id: text not null collate nocase (defined:
	// text not null)". Text from the database is escaped.
	Details []string
}

// String says what differs, on one line, with the database's text escaped.
func (d Difference) String() string {
	switch d.Kind {
	case Unknown:
		return d.Object.String()
	case Missing:
		return d.Object.String() + " is missing"
	default:
		return d.Object.String() + ": " + strings.Join(d.Details, "; ")
	}
}

// Escape returns s with every byte that is not printable text written as
// a Go escape (a newline as \n, ESC as \x1b): names and definitions read
// from a database file reach terminals and CI logs through errors.
func Escape(s string) string {
	q := strconv.QuoteToGraphic(s)
	q = q[1 : len(q)-1]
	return strings.ReplaceAll(q, `\"`, `"`)
}

// sqliteStats are the statistics tables SQLite creates on its own
// (ANALYZE, PRAGMA optimize), as SQLite defines them: a database may hold
// them whatever its version (their rows are cleared, ClearStatistics).
var sqliteStats = map[string]string{
	"sqlite_stat1": "CREATE TABLE sqlite_stat1(tbl,idx,stat)",
	"sqlite_stat4": "CREATE TABLE sqlite_stat4(tbl,idx,neq,nlt,ndlt,sample)",
}

// Differences compares every object in the schema of the database behind
// conn with what the migrations define at the database's version (its
// newest applied version; for a database without history adopted at
// LegacyBaselineVersion, that version; for an empty one, nothing), by
// definition (a table's columns and constraints, an index's table,
// columns, collations, expressions and WHERE): it returns the objects the migrations do
// not define at that version, those they define and the database lacks,
// and those whose definition differs, sorted by type and name. The
// schema_revision history and SQLite's statistics tables may be present,
// held to their own definitions. Objects in allow are accepted with any
// definition, and with an allowed table its indexes that the migrations
// name or SQLite made for its constraints. What the migrations define is
// computed once per Migrator (Default returns one Migrator per process),
// by replaying its files into a private in-memory database of conn's
// driver. It only reads conn, in one transaction.
//
// It returns an error wrapping schema.ErrSchemaMismatch for a database
// whose text encoding is not UTF-8, schema.ErrNewerDatabase or
// schema.ErrUnknownState for a database it cannot place at a version,
// and schema.ErrOutOfOrder when the
// directory holds a file added below the database's version (its schema
// then is not any version's).
func (m *Migrator) Differences(ctx context.Context, conn *sql.DB, allow ...Object) ([]Difference, error) {
	defs, err := m.definitions(ctx, conn.Driver())
	if err != nil {
		return nil, err
	}
	var out []Difference
	err = sqltx.ReadOnly(ctx, conn, func(tx *sql.Tx) error {
		// The migrations' text is UTF-8: in a UTF-16 database SQLite
		// would store ids that are not valid UTF-8 otherwise than given.
		enc, err := db.New(tx).TextEncoding(ctx)
		if err != nil {
			return fmt.Errorf("migration: read encoding: %w", err)
		}
		if enc != "UTF-8" {
			return fmt.Errorf("%w: text encoding %s, the migrations write UTF-8", schema.ErrSchemaMismatch, Escape(enc))
		}
		p, err := m.position(ctx, tx)
		if err == nil {
			err = p.refuseOutOfOrder()
		}
		if err != nil {
			return err
		}
		want := defs.at[p.current]
		defOf := func(k objectKey) *objectDef {
			if d := want[k]; d != nil {
				return d
			}
			return defs.optional[k]
		}
		// SQLite is asked about the objects whose stored SQL states their
		// definition but in other words (an index with its table's): a
		// difference in the facts is reported from the text, and the very
		// text the migrations wrote defines the very same object.
		same := func(d *objectDef) bool {
			def := defOf(key(d.Object))
			return def != nil && def.pragma != nil && maps.Equal(def.sql, d.sql)
		}
		found, err := readSchema(ctx, tx, defs.texts, func(d *objectDef, all map[objectKey]*objectDef) bool {
			if !same(d) {
				return false
			}
			reworded := d.text != defOf(key(d.Object)).text
			if d.Type != "index" {
				return reworded
			}
			t := all[tableKey(d.Table)]
			return t != nil && same(t) && equalFoldASCII(d.Table, defOf(key(d.Object)).Table) &&
				(reworded || t.text != defOf(key(t.Object)).text)
		})
		if err != nil {
			return err
		}
		out = append(compare(want, defs.optional, found, allow), sharedRoots(found)...)
		sortDifferences(out)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CheckObjects returns an error naming every difference Differences finds,
// nil if there is none: one wrapping schema.ErrUnknownObject for objects the
// migrations do not define at the database's version, schema.ErrSchemaMismatch
// for missing or changed ones (both, when there are both); or an error of
// Differences.
func (m *Migrator) CheckObjects(ctx context.Context, conn *sql.DB, allow ...Object) error {
	diffs, err := m.Differences(ctx, conn, allow...)
	if err != nil || len(diffs) == 0 {
		return err
	}
	var unknown, changed []string
	for _, d := range diffs {
		if d.Kind == Unknown {
			unknown = append(unknown, d.String())
		} else {
			changed = append(changed, d.String())
		}
	}
	var errs []error
	if len(unknown) > 0 {
		errs = append(errs, fmt.Errorf("%w: %s", schema.ErrUnknownObject, strings.Join(unknown, ", ")))
	}
	if len(changed) > 0 {
		errs = append(errs, fmt.Errorf("%w: %s", schema.ErrSchemaMismatch, strings.Join(changed, "; ")))
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return fmt.Errorf("%w; %w", errs[0], errs[1])
}

// UnknownObjects returns every object in the schema of the database behind
// conn that no version of m's directory defines (nor the schema_revision
// history, nor SQLite's statistics), except those in allow, sorted by
// type and name. It looks at each object's type, name and table only:
// Differences compares definitions at the database's version. It only
// reads conn.
func (m *Migrator) UnknownObjects(ctx context.Context, conn *sql.DB, allow ...Object) ([]Object, error) {
	defs, err := m.definitions(ctx, conn.Driver())
	if err != nil {
		return nil, err
	}
	found, err := readSchema(ctx, conn, defs.texts, func(*objectDef, map[objectKey]*objectDef) bool { return false })
	if err != nil {
		return nil, err
	}
	var out []Object
	for _, o := range found {
		if !defs.known[o.Object] && !slices.Contains(allow, o.Object) && defs.optional[key(o.Object)] == nil {
			out = append(out, o.Object)
		}
	}
	// found is a map: the order is set here.
	sort.Slice(out, func(i, j int) bool {
		if out[i].Type != out[j].Type {
			return out[i].Type < out[j].Type
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// objectKey identifies an object in a schema by its type and its name,
// its ASCII letters lowercased (lowerASCII): SQLite's names ignore ASCII
// case only, and a trigger's name is
// its own (a trigger may share its name with a table or an index, and is
// then an object of its own).
type objectKey struct{ typ, name string }

// key is o's objectKey.
func key(o Object) objectKey { return objectKey{typ: o.Type, name: lowerASCII(o.Name)} }

// tableKey is the objectKey of the table named name.
func tableKey(name string) objectKey { return key(Object{Type: "table", Name: name}) }

// defined are the definitions m's migrations make.
type defined struct {
	// at maps a version ("" before the first) to the objects defined
	// once the files up to it ran, by key.
	at map[string]map[objectKey]*objectDef
	// known are the objects of every version, by type, name and table.
	known map[Object]bool
	// optional are the objects a database may hold or not at any version:
	// the history table and SQLite's statistics tables.
	optional map[objectKey]*objectDef
	// texts are the facts of every stored SQL text the migrations
	// wrote, by type and text: a database's object of that very text is
	// not parsed again.
	texts map[string]map[string]string
}

// definitionsCache is what Migrator.definitions builds once.
type definitionsCache struct {
	// mu is held while defs is built, so that concurrent opens build it
	// once and the others wait for it.
	mu   sync.Mutex
	defs *defined
}

// definitions returns what m's migrations define, building it with drv
// on the first call that succeeds: the history table, then each file in
// turn, replayed into a private in-memory database, its schema read after
// each file as a database's is.
func (m *Migrator) definitions(ctx context.Context, drv driver.Driver) (*defined, error) {
	m.defsCache.mu.Lock()
	defer m.defsCache.mu.Unlock()
	if m.defsCache.defs != nil {
		return m.defsCache.defs, nil
	}
	mem := sql.OpenDB(memoryConnector{drv})
	defer mem.Close()
	mem.SetMaxOpenConns(1) // one in-memory database
	fail := func(err error) (*defined, error) {
		return nil, fmt.Errorf("migration: build the defined schema: %w", err)
	}
	defs := &defined{at: map[string]map[objectKey]*objectDef{"": {}}, known: map[Object]bool{}, optional: map[objectKey]*objectDef{},
		texts: map[string]map[string]string{}}
	if _, err := mem.ExecContext(ctx, schema.RevisionTable()); err != nil {
		return fail(err)
	}
	all := func(*objectDef, map[objectKey]*objectDef) bool { return true }
	history, err := readSchema(ctx, mem, nil, all)
	if err != nil {
		return fail(err)
	}
	for k, d := range history {
		defs.optional[k] = d
		defs.texts[d.Type+" "+d.text] = d.sql
	}
	for name, ddl := range sqliteStats {
		o := Object{Type: "table", Name: name, Table: name}
		defs.optional[key(o)] = &objectDef{Object: o, sql: sqlFacts("table", ddl)}
	}
	for _, f := range m.files {
		stmts, err := stmtTexts(f)
		if err != nil {
			return nil, err
		}
		for _, stmt := range stmts {
			if _, err := mem.ExecContext(ctx, stmt); err != nil {
				if ctx.Err() != nil {
					return fail(err)
				}
				// A migration file that does not replay is the
				// directory's fault, not the database's.
				return nil, fmt.Errorf("%w: build the defined schema: %s: %w", ErrDirectory, f.Name(), err)
			}
		}
		objs, err := readSchema(ctx, mem, nil, all)
		if err != nil {
			return fail(err)
		}
		at := map[objectKey]*objectDef{}
		for k, d := range objs {
			defs.known[d.Object] = true
			if d.text != "" {
				defs.texts[d.Type+" "+d.text] = d.sql
			}
			if defs.optional[k] == nil {
				at[k] = d
			}
		}
		defs.at[f.Version()] = at
	}
	m.defsCache.defs = defs
	return defs, nil
}

// compare returns the differences between found, a database's objects,
// and want, those defined at its version, with optional the objects it may
// hold or not, and allow those accepted with any definition (a table's
// defined and automatic indexes with it), sorted by type and name.
func compare(want, optional, found map[objectKey]*objectDef, allow []Object) []Difference {
	allowed := func(o Object) bool {
		if slices.Contains(allow, o) {
			return true
		}
		// An allowed table's indexes of defined names, and those SQLite
		// made for its constraints, go with it; any other is unknown.
		return o.Type == "index" && slices.Contains(allow, Object{Type: "table", Name: o.Table, Table: o.Table}) &&
			(want[key(o)] != nil || strings.HasPrefix(lowerASCII(o.Name), "sqlite_autoindex_"))
	}
	var out []Difference
	for k, got := range found {
		if allowed(got.Object) {
			continue
		}
		def := want[k]
		if def == nil {
			def = optional[k]
		}
		if def == nil {
			out = append(out, Difference{Object: got.Object, Kind: Unknown})
			continue
		}
		if got.text != "" && got.text == def.text && equalFoldASCII(got.Table, def.Table) {
			continue // the very statement the migrations ran
		}
		if details := def.differences(got); len(details) > 0 {
			out = append(out, Difference{Object: got.Object, Kind: Changed, Details: details})
		}
	}
	for k, def := range want {
		if found[k] != nil || allowed(def.Object) {
			continue
		}
		out = append(out, Difference{Object: def.Object, Kind: Missing})
	}
	sortDifferences(out)
	return out
}

// sortDifferences sorts out by type, name and kind.
func sortDifferences(out []Difference) {
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Object, out[j].Object
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return out[i].Kind < out[j].Kind
	})
}

// memoryConnector opens a private in-memory database with a driver.
type memoryConnector struct{ drv driver.Driver }

func (c memoryConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(":memory:") }
func (c memoryConnector) Driver() driver.Driver                        { return c.drv }
