package legacy

import (
	"context"

	"github.com/securemsg/storage/internal/db/legacydb"
	"github.com/securemsg/storage/internal/migration"
)

// Allowed returns the schema objects sqlitestore.Open accepts with any
// definition (migration.Migrator.CheckObjects) when the legacy upgrade is
// requested: SchemaObjects, and, while Found reports a legacy layout or a
// migration under way, the pending table itself with its indexes. That
// table is the legacy client's, which this package reads by its column
// names and rebuilds exactly as version 14 defines it; Open checks every
// definition again once MigratePlaintextWith has run. It only reads, and
// returns the errors of Found.
func Allowed(ctx context.Context, conn legacydb.DBTX) ([]migration.Object, error) {
	found, err := Found(ctx, conn)
	if err != nil {
		return nil, err
	}
	objs := SchemaObjects()
	if found {
		objs = append(objs, migration.Object{Type: "table", Name: table, Table: table})
	}
	return objs, nil
}
