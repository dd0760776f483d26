package memstore_test

import (
	"testing"

	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/memstore"
	"github.com/securemsg/storage/store/storetest"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, keys *seal.Keyring) store.Store {
		s := memstore.New(keys)
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
