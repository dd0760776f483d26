package pipeline

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"github.com/securemsg/storage/internal/migration"
)

// declarationSuffix names the file beside NN_description.sql that
// declares what the migration does to existing data (read by
// cmd/internal/frozen's proofs, which hold the migration to it).
const declarationSuffix = ".expect.json"

// declaration is the part of a declaration file the schema reference
// summarises: per fixture version and table, the rows changed (the columns
// set, or deleted), and the tables and columns dropped.
type declaration struct {
	Dropped  []string `json:"dropped"`
	Fixtures map[string]map[string][]struct {
		Set     map[string]json.RawMessage `json:"set"`
		Deleted bool                       `json:"deleted"`
	} `json:"fixtures"`
}

// writeDeclared writes the schema reference's section on the changes to
// existing data that the migrations of m declare, one line per
// declaration file and table, oldest version first. It returns an error
// if a declaration does not parse.
func writeDeclared(w io.Writer, m *migration.Migrator) error {
	names, err := fs.Glob(m.Dir(), "*"+declarationSuffix)
	if err != nil {
		return err
	}
	slices.SortFunc(names, func(a, b string) int { return migration.CompareVersions(versionOf(a), versionOf(b)) })
	fmt.Fprintf(w, "\n## Declared changes to existing data\n\n")
	if len(names) == 0 {
		fmt.Fprintln(w, "None: no migration declares a change to the rows it finds (`NN_description"+declarationSuffix+"`).")
		return nil
	}
	fmt.Fprintln(w, "What each migration declares it does to the rows it finds, in")
	fmt.Fprintln(w, "`schema/migrations/NN_description"+declarationSuffix+"` (fixture-test holds it to that).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| version | declared in | table | change |")
	fmt.Fprintln(w, "| --- | --- | --- | --- |")
	for _, name := range names {
		b, err := fs.ReadFile(m.Dir(), name)
		if err != nil {
			return err
		}
		var d declaration
		if err := json.Unmarshal(b, &d); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		// table -> column -> rows set; table -> rows deleted; per fixture.
		type change struct {
			set     map[string][]string // column -> "N rows of fixture F"
			deleted []string
		}
		byTable := map[string]*change{}
		get := func(t string) *change {
			if byTable[t] == nil {
				byTable[t] = &change{set: map[string][]string{}}
			}
			return byTable[t]
		}
		for _, fixture := range slices.Sorted(maps.Keys(d.Fixtures)) {
			for table, rows := range d.Fixtures[fixture] {
				set, deleted := map[string]int{}, 0
				for _, r := range rows {
					if r.Deleted {
						deleted++
					}
					for c := range r.Set {
						set[c]++
					}
				}
				c := get(table)
				for col, n := range set {
					c.set[col] = append(c.set[col], fmt.Sprintf("%d row(s) of fixture %s", n, fixture))
				}
				if deleted > 0 {
					c.deleted = append(c.deleted, fmt.Sprintf("%d row(s) of fixture %s", deleted, fixture))
				}
			}
		}
		for _, dropped := range d.Dropped {
			table, column, ok := strings.Cut(dropped, ".")
			c := get(table)
			if ok {
				c.set[column] = append(c.set[column], "dropped with its data")
			} else {
				c.deleted = append(c.deleted, "the table is dropped with its data")
			}
		}
		for _, table := range slices.Sorted(maps.Keys(byTable)) {
			c := byTable[table]
			var what []string
			for _, col := range slices.Sorted(maps.Keys(c.set)) {
				what = append(what, fmt.Sprintf("`%s`: %s", col, strings.Join(c.set[col], ", ")))
			}
			if len(c.deleted) > 0 {
				what = append(what, "deletes "+strings.Join(c.deleted, ", "))
			}
			fmt.Fprintf(w, "| %s | `%s` | `%s` | %s |\n", versionOf(name), name, table, cell(strings.Join(what, "; ")))
		}
	}
	return nil
}
