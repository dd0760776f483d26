package memstore_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/store/memstore"

	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, keys seal.RotatingSealer) store.Store {
		s := memstore.New(keys)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, tamper{})
}

// tamper damages the memory store's rows through its test-only methods.
type tamper struct{}

func (tamper) SetSealed(t *testing.T, s store.Store, seq int64, sealed []byte) {
	t.Helper()
	require.True(t, s.(*memstore.Store).TamperSealed(seq, sealed), "row %d", seq)
}

func (tamper) SetSequence(t *testing.T, s store.Store, seq, to int64) {
	t.Helper()
	require.True(t, s.(*memstore.Store).TamperSequence(seq, to), "row %d", seq)
}

func (tamper) SetUserID(t *testing.T, s store.Store, seq int64, user string) {
	t.Helper()
	require.True(t, s.(*memstore.Store).TamperUserID(seq, user), "row %d", seq)
}

func (tamper) SetPeerSealed(t *testing.T, s store.Store, peer store.DeviceAddress, part store.PeerPart, sealed []byte) {
	t.Helper()
	require.True(t, s.(*memstore.Store).TamperPeer(peer, part, sealed), "%s of %s", part, peer)
}

func (tamper) SetInboundSealed(t *testing.T, s store.Store, seq int64, sealed []byte) {
	t.Helper()
	require.True(t, s.(*memstore.Store).TamperInboundSealed(seq, sealed), "inbound row %d", seq)
}
