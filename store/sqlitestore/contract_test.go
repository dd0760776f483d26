package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
	"github.com/securemsg/storage/store/storetest"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, keys *seal.Keyring) store.Store {
		s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "client.db"), keys)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
