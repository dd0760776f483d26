package legacy_test

import (
	"context"
	"database/sql"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/legacy"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/testkit/migrationtest"
	"github.com/securemsg/storage/schema"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// nextMigrations are scratch migrations of the version after the embedded
// head, each changing the pending table the legacy upgrade rebuilds.
var nextMigrations = []struct {
	name, sql string
	// check runs on the upgraded database.
	check func(t *testing.T, conn *sql.DB)
}{
	{
		name: "a column with a DEFAULT and an index on it",
		sql: "ALTER TABLE pending_outbound_message ADD COLUMN scratch_attempts INTEGER NOT NULL DEFAULT 0;\n" +
			"CREATE INDEX pending_outbound_message_scratch_attempts ON pending_outbound_message (scratch_attempts);\n",
		check: func(t *testing.T, conn *sql.DB) {
			assert.Equal(t, int64(0), count(t, conn, "SELECT count(*) FROM pending_outbound_message WHERE scratch_attempts <> 0"), "every row holds the default")
		},
	},
	{
		name: "an index on the pending table",
		sql:  "CREATE INDEX pending_outbound_message_scratch_logical ON pending_outbound_message (logical_id);\n",
	},
}

// withNext returns the embedded directory with the scratch migration sql
// as its next version.
func withNext(t *testing.T, sql string) *migration.Migrator {
	t.Helper()
	m, err := migration.New(migrationtest.WithMigrations(t, map[string]string{migrationtest.NextFile(t, "pending_change"): sql}), ".")
	require.NoError(t, err)
	require.Equal(t, migrationtest.Next(t), m.Head())
	return m
}

// The legacy upgrade works at any head: sqlitestore.Open with
// WithLegacyUpgrade brings a legacy database to the version its layout
// belongs to, seals it, and then runs the later migrations on the sealed
// table, so that a next version changing that table neither breaks the
// upgrade nor is lost by the rebuild. Also when the upgrade was
// interrupted at the layout's version and resumes under the new head.
func TestLegacyUpgradeFollowsHead(t *testing.T) {
	for _, next := range nextMigrations {
		for _, start := range []struct {
			name    string
			prepare func(t *testing.T, conn *sql.DB)
		}{
			{"the fixture as it stands", func(*testing.T, *sql.DB) {}},
			{"an upgrade interrupted at the layout's version", func(t *testing.T, conn *sql.DB) {
				layout, err := layoutMigrator()
				require.NoError(t, err)
				_, err = layout.Up(context.Background(), conn)
				require.NoError(t, err)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				_, err = legacy.MigrateHooked(ctx, conn, fixtureKeyring(t), legacy.Options{Batch: 2}, legacy.Hooks{AfterRow: func(n int) {
					if n == 5 {
						cancel()
					}
				}})
				require.ErrorIs(t, err, context.Canceled)
			}},
		} {
			t.Run(next.name+", "+start.name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				m := withNext(t, next.sql)
				path, conn := loadLegacy(t)
				before := readLegacyRows(t, conn)
				require.NotEmpty(t, before)
				start.prepare(t, conn)
				require.NoError(t, conn.Close())

				s, err := sqlitestore.Open(sqliteaccess.WithMigrator(ctx, m), path, fixtureKeyring(t), sqlitestore.WithLegacyUpgrade())
				require.NoError(t, err)
				requireLegacyQueue(t, s, before)
				require.NoError(t, s.Close())

				conn, err = sql.Open(sqlitedriver.Name, sqliteaccess.DSN(path))
				require.NoError(t, err)
				conn.SetMaxOpenConns(1)
				defer conn.Close()
				requireNoDriftFrom(t, m, conn)
				assert.Zero(t, count(t, conn, "SELECT count(*) FROM sqlite_master WHERE name LIKE '%plaintext%'"), "no legacy table left")
				assert.Empty(t, onDisk(t, path, before), "no legacy plaintext left")
				if next.check != nil {
					next.check(t, conn)
				}
			})
		}
	}
}

// A legacy layout in a database above the version the layout belongs to
// went through migrations that the rebuild would undo: no migration of
// this library leaves one (Open seals before it migrates past the
// layout's version). It is refused, nothing changed: by MigratePlaintext
// with store.ErrUnknownLayout, and by Open at a head above the layout's
// already by its schema check, which places no version for a legacy
// history at a later user_version (schema.ErrUnknownState).
func TestLegacyLayoutAboveItsVersionRefused(t *testing.T) {
	ctx := context.Background()
	layout, err := strconv.Atoi(legacy.LayoutVersion)
	require.NoError(t, err)
	above := "PRAGMA user_version = " + strconv.Itoa(layout+1)

	t.Run("MigratePlaintext", func(t *testing.T) {
		path, conn := loadLegacy(t)
		_, err := conn.Exec(above)
		require.NoError(t, err)
		require.NoError(t, conn.Close())
		snapshot := dump(t, path)
		conn, err = sql.Open(sqlitedriver.Name, sqliteaccess.DSN(path))
		require.NoError(t, err)
		conn.SetMaxOpenConns(1)
		defer conn.Close()
		_, err = legacy.MigratePlaintext(ctx, conn, fixtureKeyring(t))
		require.ErrorIs(t, err, store.ErrUnknownLayout)
		require.ErrorContains(t, err, "above version "+legacy.LayoutVersion)
		require.NoError(t, conn.Close())
		assert.Equal(t, snapshot, dump(t, path), "nothing changed")
	})
	t.Run("Open", func(t *testing.T) {
		m := withNext(t, nextMigrations[0].sql)
		path, conn := loadLegacy(t)
		_, err := conn.Exec(above)
		require.NoError(t, err)
		require.NoError(t, conn.Close())
		snapshot := dump(t, path)
		_, err = sqlitestore.Open(sqliteaccess.WithMigrator(ctx, m), path, fixtureKeyring(t), sqlitestore.WithLegacyUpgrade())
		require.ErrorIs(t, err, schema.ErrUnknownState)
		assert.Equal(t, snapshot, dump(t, path), "nothing changed")
	})
}

// Upgrade refuses a nil database or migrator.
func TestUpgradeInvalid(t *testing.T) {
	_, conn := loadLegacy(t)
	_, err := legacy.Upgrade(context.Background(), conn, nil, fixtureKeyring(t), legacy.Options{})
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	m, err := migration.Default()
	require.NoError(t, err)
	_, err = legacy.Upgrade(context.Background(), nil, m, fixtureKeyring(t), legacy.Options{})
	require.ErrorIs(t, err, store.ErrInvalidArgument)
}
