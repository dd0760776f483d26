package client_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/memstore"
	"github.com/securemsg/storage/store/sqlitestore"
	"github.com/securemsg/storage/transport/transporttest"
)

// client.Open never panics on a nil or typed-nil part of its
// Config: a missing Store, Transport or Directory, one that is a nil
// pointer in its interface, an EncryptPolicy that is a nil pointer,
// and a memstore made with a nil keyring or the zero Keyring are
// store.ErrInvalidArgument, and no store is claimed (a good client opens
// on the same store afterwards).
// Left unchecked, a typed-nil store would panic in Claim and a store with
// a nil keyring at Initialize.
func TestConstructorsRefuseNilArguments(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		modify func(*client.Config)
	}{
		{"nil Store", func(c *client.Config) { c.Store = nil }},
		{"typed-nil memstore", func(c *client.Config) { c.Store = (*memstore.Store)(nil) }},
		{"typed-nil sqlitestore", func(c *client.Config) { c.Store = (*sqlitestore.Store)(nil) }},
		{"memstore with a nil keyring", func(c *client.Config) { c.Store = memstore.New(nil) }},
		{"memstore with the zero Keyring", func(c *client.Config) { c.Store = memstore.New(&seal.Keyring{}) }},
		{"nil Transport", func(c *client.Config) { c.Transport = nil }},
		{"typed-nil Transport", func(c *client.Config) { c.Transport = (*transporttest.Network)(nil) }},
		{"nil Directory", func(c *client.Config) { c.Directory = nil }},
		{"typed-nil Directory", func(c *client.Config) { c.Directory = (*transporttest.Network)(nil) }},
		{"typed-nil EncryptPolicy", func(c *client.Config) { c.EncryptPolicy = (*refusingPolicy)(nil) }},
		{"too many one-time prekeys", func(c *client.Config) { c.OneTimePrekeys = session.MaxOneTimePrekeys + 1 }},
	} {
		for _, ctor := range []struct {
			name string
			open func(client.Config) (*client.Client, error)
		}{
			{"Open", func(cfg client.Config) (*client.Client, error) { return client.Open(ctx, cfg) }},
		} {
			t.Run(tt.name+"/"+ctor.name, func(t *testing.T) {
				net := transporttest.NewNetwork()
				st := memstore.New(newKeyring(t))
				good := client.Config{Store: st, Transport: net, Directory: net}
				cfg := good
				tt.modify(&cfg)
				var (
					c   *client.Client
					err error
				)
				require.NotPanics(t, func() { c, err = ctor.open(cfg) })
				require.ErrorIs(t, err, store.ErrInvalidArgument)
				require.Nil(t, c)

				c, err = client.Open(ctx, good)
				require.NoError(t, err, "the refused call claimed no store")
				require.NoError(t, c.Initialize(ctx, alice))
			})
		}
	}
}

// store.Store has a method no package outside this module can declare, so
// client.Config.Store holds one of this module's stores or nil: a type
// with the contract's exported methods alone does not compile as one.
func TestStoreIsClosedToOtherImplementations(t *testing.T) {
	st := reflect.TypeFor[store.Store]()
	var unexported []string
	for i := range st.NumMethod() {
		if m := st.Method(i); !m.IsExported() {
			unexported = append(unexported, m.PkgPath+"."+m.Name)
		}
	}
	require.NotEmpty(t, unexported, "store.Store has only exported methods: any type could implement it")
	for _, m := range unexported {
		require.Contains(t, m, "github.com/securemsg/storage/internal/", "the unexported method must be declared in an internal package, so that no other module can declare it")
	}
}
