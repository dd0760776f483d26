package sqlitestore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// verifierTexts opens every storage key verifier of the database behind
// conn with kr: key id to the text it seals.
func verifierTexts(t *testing.T, conn *sql.DB, kr *seal.Keyring) map[seal.KeyID]string {
	t.Helper()
	rows, err := db.New(conn).ListStorageKeys(context.Background())
	require.NoError(t, err)
	out := map[seal.KeyID]string{}
	for _, r := range rows {
		text, err := kr.Open(seal.RecordKeyVerifier, seal.KeyVerifierAD(seal.KeyID(r.KeyID)), r.Verifier)
		require.NoError(t, err, "storage key %d", r.KeyID)
		out[seal.KeyID(r.KeyID)] = string(text)
	}
	return out
}

// setVerifier replaces key id's verifier, on the closed database at path,
// by one sealing text with kr's current key.
func setVerifier(t *testing.T, path string, kr *seal.Keyring, id seal.KeyID, text string) {
	t.Helper()
	v, err := kr.Seal(seal.RecordKeyVerifier, seal.KeyVerifierAD(id), []byte(text))
	require.NoError(t, err)
	conn, err := sql.Open(sqlitedriver.Name, sqliteaccess.DSN(path))
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Exec("UPDATE storage_key SET verifier = ? WHERE key_id = ?", v, int64(id))
	require.NoError(t, err)
}

// Every verifier the store records is marked (its pending queue is
// sealed): a new database's, a rotation's (finished or interrupted: the
// old key's verifier, re-sealed by the walk, keeps its text), and an
// earlier build's unmarked verifier of the current key once opened, with
// nothing else changed. An unmarked verifier of an active key that is not
// the keyring's current one is left as it is (the store seals with the
// current key only).
func TestVerifierMarked(t *testing.T) {
	ctx := context.Background()
	oldKey, newKey := rotateKey(t, 0x31), rotateKey(t, 0x32)
	keyring := func(t *testing.T, current seal.Key, older ...seal.Key) *seal.Keyring {
		kr, err := seal.NewKeyring(current, older...)
		require.NoError(t, err)
		return kr
	}
	for _, tc := range []struct {
		name string
		// run works on the store at path (open with oldKey) and returns
		// the keyring that opens every verifier afterwards.
		run  func(t *testing.T, path string, s *sqlitestore.Store) *seal.Keyring
		want map[seal.KeyID]string
	}{
		{"a new database", func(t *testing.T, path string, s *sqlitestore.Store) *seal.Keyring {
			return keyring(t, oldKey)
		}, map[seal.KeyID]string{oldKey.ID(): storeimpl.KeyVerifierSealedQueue}},
		{"a rotation", func(t *testing.T, path string, s *sqlitestore.Store) *seal.Keyring {
			require.NoError(t, s.RotateKey(ctx, newKey, 2, nil))
			return keyring(t, newKey)
		}, map[seal.KeyID]string{newKey.ID(): storeimpl.KeyVerifierSealedQueue}},
		{"an interrupted rotation", func(t *testing.T, path string, s *sqlitestore.Store) *seal.Keyring {
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			err := s.RotateKey(cctx, newKey, 1, func(p store.RotationProgress) {
				if p.Table == "storage_key" {
					cancel()
				}
			})
			require.ErrorIs(t, err, context.Canceled)
			return keyring(t, newKey, oldKey)
		}, map[seal.KeyID]string{newKey.ID(): storeimpl.KeyVerifierSealedQueue, oldKey.ID(): storeimpl.KeyVerifierSealedQueue}},
		{"an earlier build's verifier, reopened", func(t *testing.T, path string, s *sqlitestore.Store) *seal.Keyring {
			require.NoError(t, s.Close())
			setVerifier(t, path, keyring(t, oldKey), oldKey.ID(), storeimpl.KeyVerifierText)
			before := dump(t, path)
			s2, err := sqlitestore.Open(ctx, path, keyring(t, oldKey))
			require.NoError(t, err)
			require.NoError(t, s2.Close())
			after := dump(t, path)
			assert.Equal(t, before.without("storage_key"), after.without("storage_key"), "only the verifier changes")
			return keyring(t, oldKey)
		}, map[seal.KeyID]string{oldKey.ID(): storeimpl.KeyVerifierSealedQueue}},
		{"an earlier build's verifier of a key that is not current", func(t *testing.T, path string, s *sqlitestore.Store) *seal.Keyring {
			require.NoError(t, s.Close())
			setVerifier(t, path, keyring(t, oldKey), oldKey.ID(), storeimpl.KeyVerifierText)
			s2, err := sqlitestore.Open(ctx, path, keyring(t, newKey, oldKey))
			require.NoError(t, err)
			require.NoError(t, s2.Close())
			return keyring(t, oldKey)
		}, map[seal.KeyID]string{oldKey.ID(): storeimpl.KeyVerifierText}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "client.db")
			s, err := sqlitestore.Open(ctx, path, keyring(t, oldKey))
			require.NoError(t, err)
			defer s.Close()
			insert(t, s, store.DeviceAddress{UserID: "bob", DeviceID: 1}, 1)
			kr := tc.run(t, path, s)
			require.NoError(t, s.Close())
			conn, err := sql.Open(sqlitedriver.Name, sqliteaccess.DSN(path))
			require.NoError(t, err)
			defer conn.Close()
			assert.Equal(t, tc.want, verifierTexts(t, conn, kr))
		})
	}
}
