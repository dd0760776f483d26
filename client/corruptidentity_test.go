package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/memstore"
	"github.com/securemsg/storage/transport/transporttest"
)

// A stored local identity that opens but does not decode (whatever its
// length) is ErrCorruptIdentity: Open fails, the record is left as it
// was and the store is not left claimed.
func TestOpenRefusesCorruptIdentity(t *testing.T) {
	ctx := context.Background()
	me := store.DeviceAddress{UserID: "alice", DeviceID: 1}
	for _, secret := range [][]byte{{1}, []byte("garbage, not an identity"), {0, 0, 0, 200, 1, 2}} {
		st := memstore.New(newKeyring(t))
		require.NoError(t, st.SaveLocalIdentity(ctx, store.LocalIdentity{Address: me, Secret: secret}))
		net := transporttest.NewNetwork()
		_, err := client.Open(ctx, client.Config{Store: st, Transport: net, Directory: net})
		require.ErrorIs(t, err, client.ErrCorruptIdentity)
		got, err := st.LocalIdentity(ctx)
		require.NoError(t, err)
		require.Equal(t, secret, got.Secret)
		release, err := st.Claim()
		require.NoError(t, err, "the store is not left claimed")
		release()
	}
}
