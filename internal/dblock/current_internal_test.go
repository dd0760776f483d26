package dblock

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A lock file removed, or removed and made again, after it was opened is
// not the one at its path: Acquire does not keep a lock on it.
func TestCurrent(t *testing.T) {
	p := filepath.Join(t.TempDir(), "client.db-lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	defer f.Close()
	require.True(t, current(f, p))

	require.NoError(t, os.Remove(p))
	require.False(t, current(f, p), "removed")

	require.NoError(t, os.WriteFile(p, nil, 0o600))
	require.False(t, current(f, p), "replaced")
}

// A lock file removed while held (as migrate up removes one it made)
// leaves the path free: the next Acquire makes a new file and holds it,
// and a third is refused.
func TestAcquireAfterRemovedWhileHeld(t *testing.T) {
	db := filepath.Join(t.TempDir(), "client.db")
	first, err := Acquire(db)
	require.NoError(t, err)
	require.NoError(t, os.Remove(Path(db)))
	require.NoError(t, first.Release())

	second, err := Acquire(db)
	require.NoError(t, err)
	defer second.Release()
	require.True(t, current(second.f, Path(db)))
	_, err = Acquire(db)
	require.ErrorIs(t, err, ErrHeld)
}
