package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// The read-only commands work beside an application's open store (its
// writer lock held, its -wal and -shm live) and change nothing; up with
// nothing to apply succeeds without touching the files; up with a version
// to apply, which would write, refuses the held file, leaves it as it was
// and says an application has it open; after the store is closed up runs.
func TestCommandsBesideOpenStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "client.db")
	kr := storetest.NewKeyring(t)
	s, err := sqlitestore.Open(ctx, path, kr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	_, err = s.InsertPending(ctx, store.DeviceAddress{UserID: "bob", DeviceID: 1}, store.NewLogicalMessageID(), []byte("in the WAL"))
	require.NoError(t, err)

	// Every file but the -shm, the wal-index in shared memory where a
	// reader of a live WAL database marks what it reads.
	files := func() map[string][32]byte {
		m := snapshot(t, filepath.Dir(path))
		require.Contains(t, m, "client.db-shm")
		delete(m, "client.db-shm")
		return m
	}
	before := files()
	require.ElementsMatch(t, []string{"client.db", "client.db-lock", "client.db-wal"}, keys(before))
	for _, args := range [][]string{
		{"status", "-db", path},
		{"status", "-db", path, "-json"},
		{"plan", "-db", path},
		{"drift", "-db", path},
		{"drift", "-db", path, "-json"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := runCmd(t, args...)
			require.Equal(t, 0, code, stderr)
			require.Empty(t, stderr)
			require.NotEmpty(t, stdout)
			require.Equal(t, before, files())
		})
	}
	t.Run("up at head", func(t *testing.T) {
		code, stdout, stderr := runCmd(t, "up", "-db", path)
		require.Equal(t, exitOK, code, stderr)
		require.Equal(t, expand(t, "already at version {head}\n"), stdout)
		require.Equal(t, before, files(), "nothing to apply: the files are untouched")
	})
	t.Run("up with a version to apply refuses", func(t *testing.T) {
		code, stdout, stderr := runCmd(t, "up", "-db", path, "-dir", writeDir(t, withFiles(t, map[string]string{"{next}_note.sql": "ALTER TABLE session ADD COLUMN note TEXT;\n"})))
		require.Equal(t, exitError, code)
		require.Empty(t, stdout)
		require.Equal(t, "migrate: up: "+path+" is open in an application ("+path+"-lock: database lock held by another writer): close it and run up again, or wait with -lock-timeout; nothing changed\n", stderr)
		require.Equal(t, before, files())
		n, err := s.PendingMessageCount(ctx, nil)
		require.NoError(t, err, "the store still works")
		require.EqualValues(t, 1, n)
	})
	t.Run("up after close", func(t *testing.T) {
		require.NoError(t, s.Close())
		code, stdout, stderr := runCmd(t, "up", "-db", path)
		require.Equal(t, 0, code, stderr)
		require.Equal(t, expand(t, "already at version {head}\n"), stdout)
	})
}
