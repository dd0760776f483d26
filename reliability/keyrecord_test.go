package reliability_test

import (
	"context"
	"database/sql"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// The attack of the key table: with the store closed, delete every
// storage_key row, then open with a wrong key. Open refuses any key
// (ErrNoKeyRecord) and changes nothing: recording the wrong key as active
// would make the right key fail with ErrWrongKey from then on. The file
// is byte-identical, and once the rows are put back the right key opens
// the client with every pending message and session.
func TestTamperStorageKeyRowsDeleted(t *testing.T) {
	ctx := context.Background()
	s := newTamperSetup(t)
	before := allPending(t, s.a.c, nil, 100)
	require.Len(t, before, 4)

	// Keep the key rows to restore them later; then delete them.
	rows, err := s.db.QueryContext(ctx, "SELECT key_id, state, verifier, created_at FROM storage_key")
	require.NoError(t, err)
	type keyRow struct {
		id, created int64
		state       string
		verifier    []byte
	}
	var saved []keyRow
	for rows.Next() {
		var r keyRow
		require.NoError(t, rows.Scan(&r.id, &r.state, &r.verifier, &r.created))
		saved = append(saved, r)
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())
	require.Len(t, saved, 1)
	s.exec(t, "DELETE FROM storage_key")
	require.NoError(t, s.a.sql.Close())

	raw, err := os.ReadFile(s.a.path)
	require.NoError(t, err)
	conn, err := sql.Open(sqlitedriver.Name, "file:"+s.a.path+"?mode=ro")
	require.NoError(t, err)
	dumped := dump(t, conn)
	require.NoError(t, conn.Close())

	for name, kr := range map[string]*seal.Keyring{"wrong key": newKeyring(t), "right key": s.a.keys} {
		_, err := sqlitestore.Open(ctx, s.a.path, kr)
		require.ErrorIs(t, err, store.ErrNoKeyRecord, name)
		after, err := os.ReadFile(s.a.path)
		require.NoError(t, err)
		require.Equal(t, raw, after, "%s: the file is byte-identical", name)
	}
	conn, err = sql.Open(sqlitedriver.Name, "file:"+s.a.path+"?mode=ro")
	require.NoError(t, err)
	require.Equal(t, dumped, dump(t, conn), "no key was recorded")
	require.NoError(t, conn.Close())

	// Put the rows back: the right key opens everything again.
	conn, err = sql.Open(sqlitedriver.Name, sqliteaccess.DSN(s.a.path))
	require.NoError(t, err)
	for _, r := range saved {
		_, err := conn.ExecContext(ctx, "INSERT INTO storage_key (key_id, state, verifier, created_at) VALUES (?, ?, ?, ?)", r.id, r.state, r.verifier, r.created)
		require.NoError(t, err)
	}
	require.NoError(t, conn.Close())
	st, err := sqlitestore.Open(ctx, s.a.path, s.a.keys)
	require.NoError(t, err)
	defer st.Close()
	c, err := client.Open(ctx, client.Config{Store: st, Transport: s.net, Directory: s.net})
	require.NoError(t, err)
	require.Equal(t, before, allPending(t, c, nil, 100))
	_, err = c.Send(ctx, bob, []byte("after the key rows came back"))
	require.NoError(t, err, "the session with bob is intact")
}
