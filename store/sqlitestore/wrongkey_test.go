package sqlitestore_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/fixtures/version14"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/testkit/fixturekit"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// A keyring without the database's key is refused before Open changes
// anything: a database below head (the frozen version-14 fixture, in
// rollback-journal mode) is neither migrated nor switched to WAL, and no
// file is left beside it; the right key then opens it.
func TestWrongKeyLeavesAnOlderDatabaseAsItWas(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	require.NoError(t, fixturekit.Load(ctx, path, version14.FixtureSQL()))
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	listed := entries(t, filepath.Dir(path))

	_, err = sqlitestore.Open(ctx, path, storetest.NewKeyring(t))
	require.ErrorIs(t, err, seal.ErrWrongKey)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after, "the file is byte for byte as it was")
	require.Equal(t, listed, entries(t, filepath.Dir(path)), "no file left beside it")

	keys, err := seal.NewKeyring(fixturekit.Key())
	require.NoError(t, err)
	s, err := sqlitestore.Open(ctx, path, keys)
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

// A database below head that records storage keys but none active is
// refused with store.ErrNoKeyRecord before Open changes anything.
func TestNoActiveKeyLeavesAnOlderDatabaseAsItWas(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	require.NoError(t, fixturekit.Load(ctx, path, version14.FixtureSQL()))
	raw, err := sql.Open(sqlitedriver.Name, path)
	require.NoError(t, err)
	_, err = raw.Exec("UPDATE storage_key SET state = 'retiring'")
	require.NoError(t, err)
	require.NoError(t, raw.Close())
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	keys, err := seal.NewKeyring(fixturekit.Key())
	require.NoError(t, err)
	_, err = sqlitestore.Open(ctx, path, keys)
	require.ErrorIs(t, err, store.ErrNoKeyRecord)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after, "the file is byte for byte as it was")
}

// A database at head whose key records were all deleted, while it holds
// sealed values, is refused with store.ErrNoKeyRecord before Open changes
// anything: adopting the given key would make it the database's, and the
// file (in rollback-journal mode here) is not even switched to WAL.
func TestNoKeyRecordLeavesADatabaseAtHeadAsItWas(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	keys := storetest.NewKeyring(t)
	s, err := sqlitestore.Open(ctx, path, keys)
	require.NoError(t, err)
	_, err = s.InsertPending(ctx, store.DeviceAddress{UserID: "bob", DeviceID: 1}, store.NewLogicalMessageID(), []byte("hello"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	raw, err := sql.Open(sqlitedriver.Name, path)
	require.NoError(t, err)
	_, err = raw.Exec("PRAGMA journal_mode = DELETE; DELETE FROM storage_key")
	require.NoError(t, err)
	require.NoError(t, raw.Close())
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	listed := entries(t, filepath.Dir(path))

	_, err = sqlitestore.Open(ctx, path, keys)
	require.ErrorIs(t, err, store.ErrNoKeyRecord)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after, "the file is byte for byte as it was")
	require.Equal(t, listed, entries(t, filepath.Dir(path)), "no file left beside it")
}
