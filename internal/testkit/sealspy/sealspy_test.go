package sealspy_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/testkit/sealspy"
	"github.com/securemsg/storage/seal"
)

func newSpy(t *testing.T) *sealspy.Keyring {
	t.Helper()
	k, err := seal.GenerateKey()
	require.NoError(t, err)
	kr, err := seal.NewKeyring(k)
	require.NoError(t, err)
	return sealspy.New(kr)
}

func TestOpens(t *testing.T) {
	for _, tc := range []struct {
		name  string
		do    func(t *testing.T, k *sealspy.Keyring, sealed []byte)
		opens int64
	}{
		{"seal opens nothing", func(t *testing.T, k *sealspy.Keyring, _ []byte) {
			_, err := k.Seal(seal.RecordSession, nil, []byte("y"))
			require.NoError(t, err)
		}, 0},
		{"parse opens nothing", func(t *testing.T, _ *sealspy.Keyring, sealed []byte) {
			_, err := seal.Parse(sealed)
			require.NoError(t, err)
		}, 0},
		{"an open counts", func(t *testing.T, k *sealspy.Keyring, sealed []byte) {
			pt, err := k.Open(seal.RecordSession, nil, sealed)
			require.NoError(t, err)
			require.Equal(t, []byte("x"), pt)
		}, 1},
		{"failed opens count: each is an attempt to read a record", func(t *testing.T, k *sealspy.Keyring, sealed []byte) {
			_, err := k.Open(seal.RecordSession, nil, sealed[:5])
			require.ErrorIs(t, err, seal.ErrTruncated)
			_, err = k.Open(seal.RecordPendingOutbound, nil, sealed)
			require.ErrorIs(t, err, seal.ErrRecordType)
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newSpy(t)
			sealed, err := k.Seal(seal.RecordSession, nil, []byte("x"))
			require.NoError(t, err)
			require.Zero(t, k.Opens())
			tc.do(t, k, sealed)
			require.Equal(t, tc.opens, k.Opens())
		})
	}
}

func TestOpensConcurrently(t *testing.T) {
	k := newSpy(t)
	const n, each = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < each; j++ {
				pt := []byte(fmt.Sprint(i, j))
				s, err := k.Seal(seal.RecordSession, nil, pt)
				if err == nil {
					_, err = k.Open(seal.RecordSession, nil, s)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int64(n*each), k.Opens())
}

func TestBeforeNextOpen(t *testing.T) {
	k := newSpy(t)
	sealed, err := k.Seal(seal.RecordSession, nil, []byte("x"))
	require.NoError(t, err)
	var ran atomic.Int64
	k.BeforeNextOpen(func() {
		ran.Add(1)
		// An open made while f runs (by another goroutine in a test)
		// does not run f again, nor wait for it.
		_, err := k.Open(seal.RecordSession, nil, sealed)
		require.NoError(t, err)
	})
	require.Zero(t, ran.Load(), "f runs only at an open")
	_, err = k.Open(seal.RecordSession, nil, sealed)
	require.NoError(t, err)
	require.Equal(t, int64(1), ran.Load())
	_, err = k.Open(seal.RecordSession, nil, sealed)
	require.NoError(t, err)
	require.Equal(t, int64(1), ran.Load(), "only the next open runs f")
	require.Equal(t, int64(3), k.Opens())
}

func TestWrapperIsTheKeyring(t *testing.T) {
	k := newSpy(t)
	next, err := seal.GenerateKey()
	require.NoError(t, err)
	old := k.Current()
	require.NoError(t, k.Add(next))
	require.Equal(t, next.ID(), k.Keyring.Current(), "Add reaches the keyring")
	require.NoError(t, k.Forget(old))
	require.Equal(t, []seal.KeyID{next.ID()}, k.Keyring.KeyIDs())
	require.Equal(t, k.Keyring.String(), fmt.Sprintf("%v", k), "it prints as the keyring does, redacted")
}
