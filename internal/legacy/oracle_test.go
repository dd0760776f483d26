package legacy_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/schema"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// doctorCopy is what a file writer does to a copy of the user's sealed
// database so that the legacy migration takes it for one never sealed:
// every key record, the identity and every sealed row removed, the legacy
// plaintext layout in place of the pending queue, holding the writer's
// text to bob.
var doctorCopy = []string{
	"PRAGMA foreign_keys = OFF",
	"DELETE FROM storage_key", "DELETE FROM local_identity", "DELETE FROM identity_pin",
	"DELETE FROM session", "DELETE FROM session_initiation", "DELETE FROM pending_inbound_message",
	dropSealed, plantLegacy, plantLegacyRow,
}

// plantTrigger is the one-window variant: the user's rows are stashed and
// removed so the migration's check sees a database never sealed, and a
// trigger on the key record the migration inserts puts them back inside
// its first transaction, after the check looked.
var plantTrigger = []string{
	"PRAGMA foreign_keys = OFF",
	"CREATE TABLE stash_storage_key AS SELECT * FROM storage_key",
	"CREATE TABLE stash_local_identity AS SELECT * FROM local_identity",
	"DELETE FROM storage_key", "DELETE FROM local_identity", "DELETE FROM identity_pin", "DELETE FROM session",
	dropSealed, plantLegacy, plantLegacyRow,
	`CREATE TRIGGER restore_user AFTER INSERT ON storage_key BEGIN
		DELETE FROM storage_key WHERE key_id = NEW.key_id;
		INSERT INTO storage_key SELECT * FROM stash_storage_key;
		INSERT INTO local_identity SELECT * FROM stash_local_identity;
	END`,
}

// Open seals a legacy plaintext queue only when the application asks for
// it (WithLegacyUpgrade): without it, the doctored copy of a sealed
// database, the planted-trigger variant, a planted set-aside table and
// even the genuine frozen legacy fixture are refused with
// store.ErrLegacyLayout, every time, the file's schema and rows unchanged, so
// no release but the upgrading one ever seals a writer's text with the
// user's key.
func TestLegacyUpgradeOnlyWhenAsked(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		make func(t *testing.T) string
	}{
		{"doctored copy of a sealed database", func(t *testing.T) string {
			path := sealedDatabase(t)
			exec(t, path, doctorCopy...)
			return path
		}},
		{"planted trigger on storage_key", func(t *testing.T) string {
			path := sealedDatabase(t)
			exec(t, path, plantTrigger...)
			return path
		}},
		{"planted set-aside table", func(t *testing.T) string {
			path := sealedDatabase(t)
			exec(t, path, plantSetAside, plantSetAsideRow)
			return path
		}},
		{"frozen legacy fixture", func(t *testing.T) string {
			path, conn := loadLegacy(t)
			require.NoError(t, conn.Close())
			return path
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := tc.make(t)
			before := dump(t, path)
			for range 2 { // refused every time, not only the first
				s, err := sqlitestore.Open(ctx, path, fixtureKeyring(t))
				require.ErrorIs(t, err, store.ErrLegacyLayout)
				require.Nil(t, s)
				assert.Equal(t, before, dump(t, path), "nothing changed")
			}
		})
	}
}

// The upgrading release (WithLegacyUpgrade) meets the one-window variant
// too: the planted trigger and the writer's stash tables are schema
// objects no migration defines, so Open refuses the database before the
// legacy step reads it, naming each, and nothing changes.
func TestLegacyUpgradeRefusesPlantedTrigger(t *testing.T) {
	ctx := context.Background()
	path := sealedDatabase(t)
	exec(t, path, plantTrigger...)
	before := dump(t, path)
	s, err := sqlitestore.Open(ctx, path, fixtureKeyring(t), sqlitestore.WithLegacyUpgrade())
	require.ErrorIs(t, err, schema.ErrUnknownObject)
	require.Nil(t, s)
	for _, o := range []string{"trigger restore_user on storage_key", "table stash_storage_key", "table stash_local_identity"} {
		assert.Contains(t, err.Error(), o)
	}
	assert.Equal(t, before, dump(t, path), "nothing changed")
}
