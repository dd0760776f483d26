package migration_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/schema"
)

// A trigger's name is its own in SQLite: a trigger may share its name
// with a table or an index (the history table's included), whichever
// comes first in sqlite_master. Objects are compared by type and name, so
// such a trigger is an object no migration defines, reported alone (the
// table or index of its name is the defined one), by Differences,
// UnknownObjects and CheckObjects alike.
func TestTriggerSharingANameIsItsOwnObject(t *testing.T) {
	ctx := context.Background()
	m, err := migration.New(sumFS(t, map[string]string{
		"1_item.sql": "CREATE TABLE item (id INTEGER PRIMARY KEY, v TEXT NOT NULL);\n" +
			"CREATE INDEX item_v ON item (v);\n" +
			"CREATE TABLE other (x INTEGER);\n",
	}), ".")
	require.NoError(t, err)
	const (
		itemTable = "CREATE TABLE item (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"
		itemIndex = "CREATE INDEX item_v ON item (v)"
		// resurrect puts a deleted item back.
		resurrect = " AFTER DELETE ON item BEGIN INSERT INTO item (id, v) VALUES (OLD.id, OLD.v); END"
		// wipe empties item whenever other gains a row.
		wipe = " AFTER INSERT ON other BEGIN DELETE FROM item; END"
	)
	for _, tc := range []struct {
		name  string
		stmts []string
		want  migration.Object
	}{
		{
			name:  "named like an index, listed before it",
			stmts: []string{"DROP INDEX item_v", "CREATE TRIGGER item_v" + resurrect, itemIndex},
			want:  migration.Object{Type: "trigger", Name: "item_v", Table: "item"},
		},
		{
			name:  "named like an index, listed after it",
			stmts: []string{"CREATE TRIGGER item_v" + resurrect},
			want:  migration.Object{Type: "trigger", Name: "item_v", Table: "item"},
		},
		{
			name:  "named like an index in other case",
			stmts: []string{"DROP INDEX item_v", "CREATE TRIGGER ITEM_V" + resurrect, itemIndex},
			want:  migration.Object{Type: "trigger", Name: "ITEM_V", Table: "item"},
		},
		{
			name: "named like a table, listed before it",
			stmts: []string{
				"ALTER TABLE item RENAME TO item_old",
				"CREATE TRIGGER item" + wipe,
				itemTable,
				"INSERT INTO item SELECT * FROM item_old",
				"DROP TABLE item_old",
				itemIndex,
			},
			want: migration.Object{Type: "trigger", Name: "item", Table: "other"},
		},
		{
			name:  "named like a table, listed after it",
			stmts: []string{"CREATE TRIGGER other" + resurrect},
			want:  migration.Object{Type: "trigger", Name: "other", Table: "item"},
		},
		{
			name:  "named like the history table",
			stmts: []string{"CREATE TRIGGER schema_revision" + wipe},
			want:  migration.Object{Type: "trigger", Name: "schema_revision", Table: "other"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := mustOpen(t)
			_, err := m.Up(ctx, conn)
			require.NoError(t, err)
			exec(t, conn, "INSERT INTO item (id, v) VALUES (1, 'a')")
			exec(t, conn, tc.stmts...)

			diffs, err := m.Differences(ctx, conn)
			require.NoError(t, err)
			require.Equal(t, []migration.Difference{{Object: tc.want, Kind: migration.Unknown}}, diffs)

			unknown, err := m.UnknownObjects(ctx, conn)
			require.NoError(t, err)
			require.Equal(t, []migration.Object{tc.want}, unknown)

			err = m.CheckObjects(ctx, conn)
			require.ErrorIs(t, err, schema.ErrUnknownObject)
			require.NotErrorIs(t, err, schema.ErrSchemaMismatch)
			require.Equal(t, 1, strings.Count(err.Error(), tc.want.String()), "%v", err)
			require.Equal(t, 1, strings.Count(err.Error(), tc.want.Name), "the name is said once: %v", err)
		})
	}
}
