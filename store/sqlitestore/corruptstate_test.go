package sqlitestore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// A local identity row whose columns hold another storage class than the
// schema declares (a plain UPDATE does it: the device id's CHECK lets TEXT
// through) is reported with store.ErrCorruptRow, naming the column, by
// LocalIdentity and by SaveLocalIdentity (which cannot compare its
// address), and nothing is opened or written; the pending queue is not
// touched by it.
func TestLocalIdentityCorruptColumns(t *testing.T) {
	ctx := context.Background()
	me := store.DeviceAddress{UserID: "me", DeviceID: 3}
	for _, tc := range []struct {
		name, update, said string
	}{
		{"device id TEXT", "UPDATE local_identity SET device_id = 'three'", "device_id is TEXT, not INTEGER"},
		{"device id REAL", "UPDATE local_identity SET device_id = 3.5", "device_id is REAL, not INTEGER"},
		{"user id BLOB", "UPDATE local_identity SET user_id = CAST(user_id AS BLOB)", "user_id is BLOB, not TEXT"},
		{"sealed TEXT", "UPDATE local_identity SET sealed = 'x'", "sealed is TEXT, not BLOB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := dbPath(t)
			keys := storetest.NewKeyring(t)
			s := mustOpenAt(t, path, keys)
			require.NoError(t, s.SaveLocalIdentity(ctx, store.LocalIdentity{Address: me, Secret: []byte("secret")}))
			m := insert(t, s, bob, 1)
			require.NoError(t, s.Close())
			rawExec(t, path, tc.update)

			s = mustOpenAt(t, path, keys)
			_, err := s.LocalIdentity(ctx)
			require.ErrorIs(t, err, store.ErrCorruptRow)
			require.ErrorContains(t, err, tc.said)
			before := dump(t, path)
			err = s.SaveLocalIdentity(ctx, store.LocalIdentity{Address: me, Secret: []byte("other")})
			require.ErrorIs(t, err, store.ErrCorruptRow)
			require.Equal(t, before, dump(t, path), "nothing written")
			require.Equal(t, []store.PendingMessage{m}, all(t, s))
		})
	}
}

// created_at of a storage key record is read by nothing: a value of
// another class there (a TEXT date, which the column lets through) does
// not keep the database from opening.
func TestOpenIgnoresStorageKeyCreatedAt(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	keys := storetest.NewKeyring(t)
	s := mustOpenAt(t, path, keys)
	m := insert(t, s, bob, 1)
	require.NoError(t, s.Close())
	rawExec(t, path, "UPDATE storage_key SET created_at = '2024-01-01'")
	s, err := sqlitestore.Open(ctx, path, keys)
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, []store.PendingMessage{m}, all(t, s))
}
