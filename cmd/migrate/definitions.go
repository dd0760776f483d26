package main

import (
	"context"
	"database/sql"
	"errors"

	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/schema"
)

// objectDifferences returns what sqlitestore.Open refuses in the schema
// of the database behind conn: the objects no version of m's migrations
// defines (migration.Migrator.UnknownObjects, by name), and the objects
// the migrations define at the database's version that are missing or
// have another definition (migration.Migrator.Differences). An object
// defined by another version than the database's is reported as schema
// drift against its history (pipeline), not here. A database no version
// can place (newer, unknown history, a file added below its version) is
// judged by names only: drift and status report why it cannot be placed.
func objectDifferences(ctx context.Context, m *migration.Migrator, conn *sql.DB) (unknown []migration.Object, changed []migration.Difference, err error) {
	if unknown, err = m.UnknownObjects(ctx, conn); err != nil {
		return nil, nil, err
	}
	diffs, err := m.Differences(ctx, conn)
	if errors.Is(err, schema.ErrNewerDatabase) || errors.Is(err, schema.ErrUnknownState) || errors.Is(err, schema.ErrOutOfOrder) {
		return unknown, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	for _, d := range diffs {
		if d.Kind != migration.Unknown {
			changed = append(changed, d)
		}
	}
	return unknown, changed, nil
}

// rawObject names o as the database holds it, unescaped: for the JSON
// document, whose encoding escapes it; text output escapes it with
// escapeText.
func rawObject(o migration.Object) string {
	if o.Table == "" || o.Table == o.Name {
		return o.Type + " " + o.Name
	}
	return o.Type + " " + o.Name + " on " + o.Table
}
