package benchseed_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/benchseed"
	"github.com/securemsg/storage/store"
)

func TestRowLayout(t *testing.T) {
	for _, tc := range []struct{ n, recipients, share int }{
		{1000, 1000, 200}, {1_000_000, 1000, 1000}, {100_000, 1000, 200}, {50, 10, 0}, {7, 1, 0},
	} {
		cfg := benchseed.Config{N: tc.n, Recipients: tc.recipients}.Normalized()
		if tc.share != 0 {
			require.Equal(t, tc.share, cfg.Share, "n=%d", tc.n)
		}
		filtered := 0
		step := max(1, tc.n/20000) // sample large configs
		for i := 0; i < tc.n; i += step {
			if r, _ := cfg.Row(i); r == benchseed.Filtered() {
				filtered++
			}
		}
		if step == 1 {
			require.Equal(t, cfg.Share, filtered, "n=%d", tc.n)
		}
		for _, k := range []int{0, 1, cfg.Share / 2, cfg.Share - 1} {
			i := cfg.FilteredRow(k)
			r, _ := cfg.Row(i)
			require.Equal(t, benchseed.Filtered(), r, "n=%d k=%d row %d", tc.n, k, i)
			if i > 0 && tc.recipients > 1 {
				// exactly k filtered rows before it
				cnt := 0
				if tc.n <= 20000 {
					for j := 0; j < i; j++ {
						if r, _ := cfg.Row(j); r == benchseed.Filtered() {
							cnt++
						}
					}
					require.Equal(t, k, cnt)
				}
			}
		}
	}
}

func TestSeedOpens(t *testing.T) {
	ctx := context.Background()
	keys, err := benchseed.NewKeyring()
	require.NoError(t, err)
	cfg := benchseed.Config{N: 300, Recipients: 7, BatchSize: 64}.Normalized()
	s, err := benchseed.Open(ctx, filepath.Join(t.TempDir(), "seed.db"), keys, cfg)
	require.NoError(t, err)
	defer s.Close()

	n, err := s.CountPending(ctx, nil)
	require.NoError(t, err)
	require.EqualValues(t, cfg.N, n)
	f := benchseed.Filtered()
	n, err = s.CountPending(ctx, &f)
	require.NoError(t, err)
	require.EqualValues(t, cfg.Share, n)

	seen := 0
	for after := int64(0); ; {
		page, err := s.PagePending(ctx, store.PageRequest{After: after, Limit: store.MaxPageSize})
		require.NoError(t, err)
		for _, m := range page.Messages {
			r, id := cfg.Row(seen)
			require.Equal(t, int64(seen+1), m.Sequence)
			require.Equal(t, r, m.Recipient)
			require.Equal(t, id, m.ID)
			require.Equal(t, benchseed.Plaintext(seen, cfg.PlaintextSize), m.Plaintext)
			seen++
		}
		if page.Next == nil {
			break
		}
		after = *page.Next
	}
	require.Equal(t, cfg.N, seen)
	page, err := s.PagePending(ctx, store.PageRequest{Limit: 10, Recipient: &f})
	require.NoError(t, err)
	for k, m := range page.Messages {
		require.Equal(t, int64(cfg.FilteredRow(k)+1), m.Sequence)
	}
	require.Len(t, benchseed.Plaintext(3, 200), 200)
}
