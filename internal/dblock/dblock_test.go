package dblock_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/dblock"
)

// A second Acquire of a held lock fails at once with ErrHeld naming the
// lock file, through another path to the same database too; after Release
// the lock is free again, and the lock file stays.
func TestAcquire(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "client.db")
	require.NoError(t, os.WriteFile(db, nil, 0o600))
	link := filepath.Join(dir, "link.db")
	require.NoError(t, os.Symlink(db, link))

	l, err := dblock.Acquire(db)
	require.NoError(t, err)
	for _, path := range []string{db, link, filepath.Join(dir, ".", "client.db")} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			_, err := dblock.Acquire(path)
			require.ErrorIs(t, err, dblock.ErrHeld)
			require.ErrorContains(t, err, db+"-lock")
		})
	}
	require.NoError(t, l.Release())
	require.NoError(t, l.Release(), "a second release does nothing")
	fi, err := os.Stat(db + "-lock")
	require.NoError(t, err, "the lock file stays")
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	l, err = dblock.Acquire(link)
	require.NoError(t, err)
	require.NoError(t, l.Release())
	var none *dblock.Lock
	require.NoError(t, none.Release())
}

// A note written by the lock's holder is what Note reads, until the
// holder empties it; the lock stays held throughout.
func TestNote(t *testing.T) {
	db := filepath.Join(t.TempDir(), "client.db")
	require.Empty(t, dblock.Note(db), "no lock file")
	l, err := dblock.Acquire(db)
	require.NoError(t, err)
	defer l.Release()
	require.Empty(t, dblock.Note(db))
	require.NoError(t, l.SetNote("migrate up pid 12345\n"))
	require.Equal(t, "migrate up pid 12345\n", dblock.Note(db))
	require.NoError(t, l.SetNote("x"))
	require.Equal(t, "x", dblock.Note(db), "replaced, not appended")
	_, err = dblock.Acquire(db)
	require.ErrorIs(t, err, dblock.ErrHeld)
	require.NoError(t, l.SetNote(""))
	require.Empty(t, dblock.Note(db))
	require.NoError(t, l.Release())
	require.Error(t, l.SetNote("y"), "released")
}
