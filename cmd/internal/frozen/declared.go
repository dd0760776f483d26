package frozen

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/securemsg/storage/internal/migration"
)

// DeclaredSuffix ends the name of the file in which a migration's author
// declares the changes the migration makes to existing data: beside
// NN_description.sql, NN_description.expect.json. Prove allows a change
// to a row of a frozen fixture only where such a file declares it.
const DeclaredSuffix = ".expect.json"

// Declared is the content of a declaration file. It holds, per fixture
// ("14" for fixtures/version14, by its schema version; LegacyFixture for
// fixtures/legacy) and per table, the rows the
// migration changes, each named by its primary key: the values it sets
// (Set) or its removal (Deleted). Dropped lists the tables and columns
// ("table" or "table.column") the migration drops with their data. Values
// are JSON: a string is TEXT, an integer INTEGER, a number with a fraction
// or exponent REAL, null NULL, {"hex": "00ab"} a BLOB.
type Declared struct {
	Dropped  []string                            `json:"dropped,omitempty"`
	Fixtures map[string]map[string][]DeclaredRow `json:"fixtures"`
}

// DeclaredRow is one row a migration changes.
type DeclaredRow struct {
	Key     map[string]any `json:"key"`
	Set     map[string]any `json:"set,omitempty"`
	Deleted bool           `json:"deleted,omitempty"`
}

// declaredFile is one declaration file of a migration directory.
type declaredFile struct {
	name    string // NN_description.expect.json
	version string
	decl    Declared
}

// readDeclared reads every declaration file of m's directory, oldest
// version first. Each must sit beside a migration file of its name.
func readDeclared(m *migration.Migrator) ([]declaredFile, error) {
	names, err := fs.Glob(m.Dir(), "*"+DeclaredSuffix)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDeclared, err)
	}
	files, err := m.Dir().Files()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDeclared, err)
	}
	versionOf := map[string]string{}
	for _, f := range files {
		versionOf[strings.TrimSuffix(f.Name(), ".sql")] = f.Version()
	}
	var out []declaredFile
	for _, name := range names {
		base := strings.TrimSuffix(path.Base(name), DeclaredSuffix)
		v, ok := versionOf[base]
		if !ok {
			return nil, fmt.Errorf("%w: %s declares the changes of %s.sql, which is not in the migration directory", ErrDeclared, name, base)
		}
		b, err := fs.ReadFile(m.Dir(), name)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrDeclared, err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		dec.UseNumber()
		f := declaredFile{name: name, version: v}
		if err := dec.Decode(&f.decl); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrDeclared, name, err)
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b declaredFile) int { return migration.CompareVersions(a.version, b.version) })
	return out, nil
}

// expectation is what the declarations of the applied versions say
// about one fixture: every value is an SQLite literal, as a Dump holds it.
type expectation struct {
	files   []string                                  // the declaration files that apply
	set     map[string]map[string]map[string]declared // table -> row key -> column -> value
	deleted map[string]map[string]string              // table -> row key -> file
	dropped map[string]string                         // "table" or "table.column" -> file
}

// declared is one declared value and the file that declares it.
type declared struct {
	value, file string
}

// expectationFor merges the declarations of the versions applied to the
// fixture of schema version version, a later version's value of a column
// overriding an earlier one's. Keys are matched against before's primary
// keys: a declaration naming a row the fixture does not hold, or a table
// without a primary key, is an error.
func expectationFor(files []declaredFile, applied []string, version string, before *Database) (*expectation, error) {
	e := &expectation{
		set:     map[string]map[string]map[string]declared{},
		deleted: map[string]map[string]string{},
		dropped: map[string]string{},
	}
	for _, f := range files {
		if !slices.Contains(applied, f.version) {
			continue
		}
		e.files = append(e.files, f.name)
		for _, d := range f.decl.Dropped {
			e.dropped[d] = f.name
		}
		for _, table := range slices.Sorted(maps.Keys(f.decl.Fixtures[version])) {
			t := before.Data[table]
			if t == nil {
				return nil, fmt.Errorf("%w: %s: fixture %s has no table %s", ErrDeclared, f.name, version, table)
			}
			if len(t.Key) == 0 {
				return nil, fmt.Errorf("%w: %s: table %s has no primary key to name its rows by", ErrDeclared, f.name, table)
			}
			for i, r := range f.decl.Fixtures[version][table] {
				key, err := declaredKey(t, r.Key)
				if err != nil {
					return nil, fmt.Errorf("%w: %s: fixture %s, %s row %d: %w", ErrDeclared, f.name, version, table, i+1, err)
				}
				if !slices.ContainsFunc(t.Values, func(row []string) bool { return t.rowKey(row) == key }) {
					return nil, fmt.Errorf("%w: %s: fixture %s holds no %s row %s", ErrDeclared, f.name, version, table, describeKey(t, key))
				}
				if r.Deleted {
					if len(r.Set) > 0 {
						return nil, fmt.Errorf("%w: %s: %s row %s is both deleted and set", ErrDeclared, f.name, table, describeKey(t, key))
					}
					if e.deleted[table] == nil {
						e.deleted[table] = map[string]string{}
					}
					e.deleted[table][key] = f.name
					continue
				}
				if len(r.Set) == 0 {
					return nil, fmt.Errorf("%w: %s: %s row %s declares neither set nor deleted", ErrDeclared, f.name, table, describeKey(t, key))
				}
				if e.set[table] == nil {
					e.set[table] = map[string]map[string]declared{}
				}
				if e.set[table][key] == nil {
					e.set[table][key] = map[string]declared{}
				}
				for col, v := range r.Set {
					lit, err := jsonLiteral(v)
					if err != nil {
						return nil, fmt.Errorf("%w: %s: %s row %s column %s: %w", ErrDeclared, f.name, table, describeKey(t, key), col, err)
					}
					e.set[table][key][col] = declared{value: lit, file: f.name}
				}
			}
		}
	}
	return e, nil
}

// declaredKey renders a declared key as a row key of t: it must name
// exactly t's primary key columns.
func declaredKey(t *Table, key map[string]any) (string, error) {
	if len(key) != len(t.Key) {
		return "", fmt.Errorf("key names %d column(s), the primary key has %d (%s)", len(key), len(t.Key), strings.Join(t.keyColumns(), ", "))
	}
	lits := make([]string, len(t.Key))
	for i, c := range t.keyColumns() {
		v, ok := key[c]
		if !ok {
			return "", fmt.Errorf("key lacks primary key column %s", c)
		}
		lit, err := jsonLiteral(v)
		if err != nil {
			return "", fmt.Errorf("key column %s: %w", c, err)
		}
		lits[i] = lit
	}
	return strings.Join(lits, keySep), nil
}

// keySep joins a row key's literals; no literal holds it unescaped.
const keySep = "\x00"

// jsonLiteral renders a declared JSON value as the SQLite literal of its
// storage class (see Declared).
func jsonLiteral(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "NULL", nil
	case string:
		return literal(v)
	case json.Number:
		if !strings.ContainsAny(v.String(), ".eE") {
			n, err := v.Int64()
			if err != nil {
				return "", err
			}
			return literal(n)
		}
		f, err := v.Float64()
		if err != nil {
			return "", err
		}
		return literal(f)
	case map[string]any:
		h, ok := v["hex"].(string)
		if len(v) != 1 || !ok {
			return "", errors.New(`an object value must be {"hex": "..."} (a BLOB)`)
		}
		b, err := hex.DecodeString(h)
		if err != nil {
			return "", err
		}
		return literal(b)
	}
	return "", fmt.Errorf("value %v: not a string, number, null or {\"hex\": ...}", v)
}

// keyColumns returns t's primary key columns in key order.
func (t *Table) keyColumns() []string {
	out := make([]string, len(t.Key))
	for i, k := range t.Key {
		out[i] = t.Columns[k]
	}
	return out
}

// rowKey returns row's key: its primary key literals, or every value for
// a table without a primary key.
func (t *Table) rowKey(row []string) string {
	if len(t.Key) == 0 {
		return strings.Join(row, keySep)
	}
	lits := make([]string, len(t.Key))
	for i, k := range t.Key {
		lits[i] = row[k]
	}
	return strings.Join(lits, keySep)
}

// describeKey names a row by its key as a reviewer reads it:
// (user_id='bob', device_id=1), or the whole row for a table without a
// primary key.
func describeKey(t *Table, key string) string {
	lits := strings.Split(key, keySep)
	cols := t.Columns
	if len(t.Key) > 0 {
		cols = t.keyColumns()
	}
	parts := make([]string, len(lits))
	for i, l := range lits {
		if i < len(cols) {
			parts[i] = cols[i] + "=" + l
		} else {
			parts[i] = l
		}
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
