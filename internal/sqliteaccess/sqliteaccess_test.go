package sqliteaccess_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/testkit/sealspy"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/memstore"
	"github.com/securemsg/storage/store/sqlitestore"
)

func TestDriver(t *testing.T) {
	ctx := context.Background()
	require.Equal(t, sqlitedriver.Name, sqliteaccess.Driver(ctx))
	faulty := sqliteaccess.WithDriver(ctx, "sqlite3-fault-1")
	require.Equal(t, "sqlite3-fault-1", sqliteaccess.Driver(faulty))
	require.Equal(t, sqlitedriver.Name, sqliteaccess.Driver(ctx), "the parent context is unchanged")
}

// DB, Keyring and SequenceHighWater reach an open store's own handle and
// keys, and follow what the store writes.
func TestStoreFields(t *testing.T) {
	ctx := context.Background()
	spy := sealspy.New(storetest.NewKeyring(t))
	s, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "client.db"), spy)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })

	require.Same(t, spy, sqliteaccess.Keyring(s), "the keys given to Open, wrapper and all")
	conn := sqliteaccess.DB(s)
	require.NotNil(t, conn)
	require.Same(t, conn, sqliteaccess.DB(s), "one handle, the store's")
	require.Equal(t, 1, conn.Stats().MaxOpenConnections, "the store's one connection")

	hw, err := sqliteaccess.SequenceHighWater(ctx, s)
	require.NoError(t, err)
	require.Zero(t, hw)
	bob := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	seq, err := s.InsertPending(ctx, bob, storetest.ID(1), []byte("x"))
	require.NoError(t, err)
	_, err = s.InsertPending(ctx, bob, storetest.ID(2), []byte("y"))
	require.NoError(t, err)
	removed, err := s.AbandonPending(ctx, bob, storetest.ID(2))
	require.NoError(t, err)
	require.True(t, removed)
	hw, err = sqliteaccess.SequenceHighWater(ctx, s)
	require.NoError(t, err)
	require.Equal(t, seq+1, hw, "the mark stays at the deleted row's sequence")
}

// Anything but a *sqlitestore.Store panics with a message naming what
// was given.
func TestStoreFieldsRefuseOtherValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   any
		want string
	}{
		{"nil", nil, "sqliteaccess: <nil> is not a non-nil *github.com/securemsg/storage/store/sqlitestore.Store"},
		{"nil store", (*sqlitestore.Store)(nil), "sqliteaccess: *sqlitestore.Store is not a non-nil"},
		{"store value", &struct{ conn int }{}, "sqliteaccess: *struct { conn int } is not a non-nil"},
		{"another store", memstore.New(storetest.NewKeyring(t)), "sqliteaccess: *memstore.Store is not a non-nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for name, f := range map[string]func(){
				"DB":      func() { sqliteaccess.DB(tc.st) },
				"Keyring": func() { sqliteaccess.Keyring(tc.st) },
				"SequenceHighWater": func() {
					_, _ = sqliteaccess.SequenceHighWater(context.Background(), tc.st)
				},
			} {
				require.Contains(t, panicOf(f), tc.want, name)
			}
		})
	}
}

// A field the store renamed, or gave another type, panics naming it.
func TestStoreFieldChanged(t *testing.T) {
	s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "client.db"), storetest.NewKeyring(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.Equal(t, `sqliteaccess: github.com/securemsg/storage/store/sqlitestore.Store has no field "gone" (of type int): rename it in internal/sqliteaccess too`,
		panicOf(func() { sqliteaccess.IntField(s, "gone") }))
	require.Equal(t, `sqliteaccess: field "conn" of github.com/securemsg/storage/store/sqlitestore.Store is a *sql.DB, want int: change internal/sqliteaccess too`,
		panicOf(func() { sqliteaccess.IntField(s, "conn") }))
}

// panicOf returns what f panics with, as a string ("" if it returns).
func panicOf(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}
