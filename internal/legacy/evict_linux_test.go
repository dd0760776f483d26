package legacy_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// evict writes path to disk and drops it from the OS page cache, so that
// the measured open starts cold, as an application's first start after
// an upgrade does.
func evict(b *testing.B, path string) {
	b.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(b, err)
	defer f.Close()
	require.NoError(b, f.Sync())
	require.NoError(b, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
}
