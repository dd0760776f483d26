//go:build unix

package sqlitestore_test

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// A FIFO planted beside the database as its -journal, -wal or -shm is
// refused at once: SQLite would block opening a hot journal to read it.
func TestOpenRefusesFIFOSideFiles(t *testing.T) {
	for _, suffix := range []string{"-journal", "-wal", "-shm"} {
		t.Run(suffix, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "alice.db")
			kr := keyring(t)
			s, err := sqlitestore.Open(t.Context(), path, kr)
			require.NoError(t, err)
			require.NoError(t, s.Close())
			require.NoError(t, syscall.Mkfifo(path+suffix, 0o600))
			done := make(chan error, 1)
			go func() { _, err := sqlitestore.Open(t.Context(), path, kr); done <- err }()
			select {
			case err := <-done:
				require.ErrorIs(t, err, store.ErrNotDatabase)
			case <-time.After(30 * time.Second):
				t.Fatal("Open blocked on the FIFO")
			}
		})
	}
}
