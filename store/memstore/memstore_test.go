package memstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/memstore"
)

func TestSequenceHighWater(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(storetest.NewKeyring(t))
	alice := store.DeviceAddress{UserID: "alice", DeviceID: 1}
	require.Zero(t, s.SequenceHighWater())

	var seqs []int64
	for i := 1; i <= 3; i++ {
		seq, err := s.InsertPending(ctx, alice, storetest.ID(i), []byte("x"))
		require.NoError(t, err)
		require.Equal(t, seq, s.SequenceHighWater())
		seqs = append(seqs, seq)
	}
	ok, err := s.AbandonPending(ctx, alice, storetest.ID(3))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, seqs[2], s.SequenceHighWater(), "deleting keeps the high-water mark")

	// Neither a duplicate nor invalid input moves the mark.
	_, err = s.InsertPending(ctx, alice, storetest.ID(1), []byte("dup"))
	require.ErrorIs(t, err, store.ErrDuplicate)
	_, err = s.InsertPending(ctx, store.DeviceAddress{}, storetest.ID(9), []byte("bad"))
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	require.Equal(t, seqs[2], s.SequenceHighWater())

	seq, err := s.InsertPending(ctx, alice, storetest.ID(3), []byte("again"))
	require.NoError(t, err)
	require.Greater(t, seq, seqs[2])
	require.Equal(t, seq, s.SequenceHighWater())
}

func TestCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := memstore.New(storetest.NewKeyring(t))
	_, err := s.InsertPending(ctx, store.DeviceAddress{UserID: "alice"}, storetest.ID(1), []byte("x"))
	require.ErrorIs(t, err, context.Canceled)
	n, err := s.PendingMessageCount(context.Background(), nil)
	require.NoError(t, err)
	require.Zero(t, n)
}
