package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/securemsg/storage/cmd/internal/pipeline"
	"github.com/securemsg/storage/internal/migration"
)

// newDriftDoc returns drift's document for database db, before anything
// is read.
func newDriftDoc(db string) *driftDoc {
	return &driftDoc{docHeader: docHeader{Command: "drift", DB: db}, Differences: []pipeline.Difference{}, Schema: []pipeline.SchemaChange{}, History: []pipeline.HistoryDrift{}, Unknown: []string{}}
}

// driftDoc is drift's JSON document.
type driftDoc struct {
	docHeader // command "drift"; OK is true when there is no drift at all
	// Differences lists each schema difference in words.
	Differences []pipeline.Difference `json:"differences"`
	// Schema lists the statements that would bring the schema to head.
	Schema []pipeline.SchemaChange `json:"schema"`
	// History lists the schema_revision rows that disagree with the
	// migration directory.
	History []pipeline.HistoryDrift `json:"history"`
	// Unknown names each schema object no migration defines
	// (migration.Migrator.UnknownObjects): the store refuses to open a
	// database holding one.
	Unknown []string `json:"unknown_objects"`
	// Definitions names each table or index the migrations define at the
	// database's version that is missing or has another definition, and
	// what differs (migration.Migrator.Differences): the store refuses to
	// open such a database too. Text read from the file is escaped.
	Definitions []string `json:"definition_differences"`
}

// driftFound is what drift reads from the database.
type driftFound struct {
	d       pipeline.Differences
	unknown []migration.Object
	changed []migration.Difference
}

// cmdDrift compares a real database, opened read-only, with head: the
// schema objects no migration defines, the schema through Atlas's inspector and differ, printed as the SQL that
// would bring it to head (never run), and the history rows against the
// migration directory. Exit 0 when identical, 1 on drift.
func cmdDrift(ctx context.Context, env *cmdEnv) error {
	doc := newDriftDoc(env.db)
	env.doc = doc
	if err := env.checkFormat(); err != nil {
		return err
	}
	path, m, found, err := readTarget(ctx, env, func(m *migration.Migrator, conn *sql.DB) (driftFound, error) {
		unknown, changed, err := objectDifferences(ctx, m, conn)
		if err != nil {
			return driftFound{}, err
		}
		d, err := pipeline.Drift(ctx, m, conn)
		return driftFound{d: d, unknown: unknown, changed: changed}, err
	})
	if err != nil {
		return err
	}
	d := found.d
	n := len(d.Schema) + len(d.History) + len(found.unknown) + len(found.changed)
	doc.Differences, doc.Schema, doc.History = nonNil(d.Found), nonNil(d.Schema), nonNil(d.History)
	for _, o := range found.unknown {
		doc.Unknown = append(doc.Unknown, rawObject(o))
	}
	for _, c := range found.changed {
		doc.Definitions = append(doc.Definitions, c.String())
	}
	if env.annotating() {
		env.annotate(env.driftAnnotations(m, path, d, doc.Unknown))
	}
	if !env.json && !env.annotating() {
		w := env.stdout
		if len(found.unknown) > 0 {
			fmt.Fprintf(w, "-- %d schema object(s) no migration defines (the store refuses to open %s):\n", len(found.unknown), path)
			for _, o := range found.unknown {
				fmt.Fprintf(w, "-- %s\n", escapeText(rawObject(o)))
			}
		}
		if len(found.changed) > 0 {
			fmt.Fprintf(w, "-- %d defined schema object(s) missing or defined otherwise (the store refuses to open %s):\n", len(found.changed), path)
			for _, c := range found.changed {
				fmt.Fprintf(w, "-- %s\n", escapeText(c.String()))
			}
		}
		if len(d.Schema) > 0 {
			fmt.Fprintf(w, "-- schema drift: %d statement(s) would bring %s to head %s (not run)\n", len(d.Schema), path, m.Head())
			for _, f := range d.Found {
				fmt.Fprintf(w, "-- %s\n", escapeText(f.String()))
			}
			for _, c := range d.Schema {
				if c.Comment != "" {
					fmt.Fprintf(w, "-- %s\n", escapeText(c.Comment))
				}
				// One line a statement: a name holding a line break
				// cannot make a line of its own.
				fmt.Fprintln(w, escapeText(strings.TrimSuffix(oneLine(c.SQL), ";"))+";")
			}
		}
		if len(d.History) > 0 {
			fmt.Fprintf(w, "-- history drift: %d schema_revision row(s) disagree with the migration directory\n", len(d.History))
			for _, h := range d.History {
				fmt.Fprintf(w, "-- %s\n", escapeText(h.String()))
			}
		}
		if n == 0 {
			fmt.Fprintf(w, "no drift: %s matches head %s (schema and history)\n", path, m.Head())
		}
	}
	if n > 0 {
		return findingf("drift from head: %d schema difference(s), %d history row(s), %d unknown schema object(s), %d object(s) missing or defined otherwise", schemaDifferences(d), len(d.History), len(found.unknown), len(found.changed))
	}
	return nil
}
