package sqlitestore_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// rawExec runs test-only statements on the database at path through a
// connection of its own, closed (so checkpointed) before it returns.
func rawExec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	conn, err := sql.Open(sqlitedriver.Name, sqliteaccess.DSN(path))
	require.NoError(t, err)
	for _, q := range stmts {
		_, err := conn.Exec(q)
		require.NoError(t, err, q)
	}
	require.NoError(t, conn.Close())
}

// sealedTables lists the tables with a sealed column, read from the
// database itself, so that a new one cannot be missed by the key check's
// test below.
func sealedTables(t *testing.T, path string) []string {
	t.Helper()
	conn, err := sql.Open(sqlitedriver.Name, sqliteaccess.DSN(path))
	require.NoError(t, err)
	defer conn.Close()
	rows, err := conn.Query(`SELECT m.name FROM sqlite_master m, pragma_table_info(m.name) c
		WHERE m.type = 'table' AND c.name = 'sealed' ORDER BY m.name`)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		out = append(out, n)
	}
	require.NoError(t, rows.Err())
	return out
}

// With its storage_key rows deleted, a database that holds any sealed value
// refuses every keyring (wrong or right) with store.ErrNoKeyRecord and the file
// stays byte-identical; before the check, a wrong key was adopted as
// active and the right one then failed with ErrWrongKey.
func TestOpenRefusesKeyAdoptionOverSealedValues(t *testing.T) {
	ctx := context.Background()
	// One row per table with a sealed column: a sealed value in that table
	// alone must be enough to refuse.
	rowIn := map[string]string{
		"local_identity":           `INSERT INTO local_identity (id, user_id, device_id, sealed) VALUES (1, 'alice', 1, x'4b534d52')`,
		"identity_pin":             `INSERT INTO identity_pin (user_id, device_id, sealed) VALUES ('bob', 1, x'4b534d52')`,
		"session":                  `INSERT INTO session (user_id, device_id, sealed) VALUES ('bob', 1, x'4b534d52')`,
		"session_initiation":       `INSERT INTO session_initiation (user_id, device_id, sealed) VALUES ('bob', 1, x'4b534d52')`,
		"pending_outbound_message": `INSERT INTO pending_outbound_message (recipient_user_id, recipient_device_id, logical_id, sealed) VALUES ('bob', 1, x'00112233445566778899aabbccddeeff', x'4b534d52')`,
		"pending_inbound_message":  `INSERT INTO pending_inbound_message (sender_user_id, sender_device_id, logical_id, sealed) VALUES ('bob', 1, x'00112233445566778899aabbccddeeff', x'4b534d52')`,
	}
	probe := dbPath(t)
	mustOpenAt(t, probe, storetest.NewKeyring(t)).Close()
	tables := sealedTables(t, probe)
	require.NotEmpty(t, tables)
	keys := make([]string, 0, len(rowIn))
	for k := range rowIn {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	require.Equal(t, tables, keys, "every table with a sealed column has a case")

	type setup struct {
		name  string
		stmts []string
	}
	var cases []setup
	for _, table := range tables {
		cases = append(cases, setup{name: "storage_key emptied, a row in " + table, stmts: []string{"DELETE FROM storage_key", rowIn[table]}})
	}
	cases = append(cases,
		setup{name: "storage_key emptied, rows everywhere", stmts: append([]string{"DELETE FROM storage_key"}, func() []string {
			var all []string
			for _, t := range tables {
				all = append(all, rowIn[t])
			}
			return all
		}()...)},
		setup{name: "every key marked retiring, a pending row", stmts: []string{"UPDATE storage_key SET state = 'retiring'", rowIn["pending_outbound_message"]}},
		setup{name: "every key marked retiring, nothing sealed", stmts: []string{"UPDATE storage_key SET state = 'retiring'"}},
	)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := dbPath(t)
			right := storetest.NewKeyring(t)
			mustOpenAt(t, path, right).Close()
			rawExec(t, path, tc.stmts...)
			before, err := os.ReadFile(path)
			require.NoError(t, err)
			dumped := dump(t, path)

			for _, kr := range []*seal.Keyring{storetest.NewKeyring(t), right} {
				_, err := sqlitestore.Open(ctx, path, kr)
				require.ErrorIs(t, err, store.ErrNoKeyRecord)
				after, err := os.ReadFile(path)
				require.NoError(t, err)
				require.Equal(t, before, after, "a refused open leaves the file byte-identical")
				require.Equal(t, dumped, dump(t, path))
				if wal, err := os.ReadFile(path + "-wal"); err == nil {
					require.Empty(t, wal, "a refused open leaves nothing in the WAL")
				}
			}
		})
	}
}

// A database that records no key and holds nothing sealed (a file
// migrated by `migrate up`, or a new one) adopts the keyring's current key,
// which from then on is the only one that opens it.
func TestOpenAdoptsKeyForDatabaseWithoutSealedValues(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, path string)
	}{
		{name: "new file", prepare: func(*testing.T, string) {}},
		{name: "migrated by migrate up", prepare: func(t *testing.T, path string) {
			conn, err := sql.Open(sqlitedriver.Name, sqliteaccess.DSN(path))
			require.NoError(t, err)
			defer conn.Close()
			m, err := migration.Default()
			require.NoError(t, err)
			_, err = m.Up(ctx, conn)
			require.NoError(t, err)
		}},
		{name: "opened before, key rows deleted, nothing sealed", prepare: func(t *testing.T, path string) {
			mustOpenAt(t, path, storetest.NewKeyring(t)).Close()
			rawExec(t, path, "DELETE FROM storage_key")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := dbPath(t)
			tc.prepare(t, path)
			kr := storetest.NewKeyring(t)
			s := mustOpenAt(t, path, kr)
			m := insert(t, s, alice, 1)
			require.NoError(t, s.Close())

			_, err := sqlitestore.Open(ctx, path, storetest.NewKeyring(t))
			require.ErrorIs(t, err, seal.ErrWrongKey, "the adopted key is the database's")
			s = mustOpenAt(t, path, kr)
			require.Equal(t, []store.PendingMessage{m}, all(t, s))
		})
	}
}

// TestOpenPathWithURISyntax: a file name holding what SQLite reads as URI
// syntax (?, #, %) opens that very file, not an in-memory database or a
// truncated name.
func TestOpenPathWithURISyntax(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"a?mode=memory.db", "b#frag.db", "c%3f.db"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), name)
			keys := storetest.NewKeyring(t)
			s := mustOpenAt(t, path, keys)
			_, err := s.InsertPending(ctx, store.DeviceAddress{UserID: "bob", DeviceID: 1}, store.NewLogicalMessageID(), []byte("kept"))
			require.NoError(t, err)
			require.NoError(t, s.Close())
			require.FileExists(t, path)
			s = mustOpenAt(t, path, keys)
			defer s.Close()
			n, err := s.PendingMessageCount(ctx, nil)
			require.NoError(t, err)
			require.Equal(t, int64(1), n, "the message is in the file named")
		})
	}
}
