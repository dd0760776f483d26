package benchseed_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/testkit/benchseed"
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

	n, err := s.PendingMessageCount(ctx, nil)
	require.NoError(t, err)
	require.EqualValues(t, cfg.N, n)
	f := benchseed.Filtered()
	n, err = s.PendingMessageCount(ctx, &f)
	require.NoError(t, err)
	require.EqualValues(t, cfg.Share, n)

	seen := 0
	for after := int64(0); ; {
		page, err := s.PendingMessages(ctx, store.PageRequest{After: &after, Limit: store.MaxPageSize})
		require.NoError(t, err)
		for _, m := range page.Messages {
			r, id := cfg.Row(seen)
			require.Equal(t, int64(seen+1), m.Sequence)
			require.Equal(t, r, m.Recipient)
			require.Equal(t, id, m.ID)
			require.Equal(t, benchseed.Plaintext(seen, cfg.PlaintextSize), m.Plaintext)
			seen++
		}
		if page.NextAfterSequence == nil {
			break
		}
		after = *page.NextAfterSequence
	}
	require.Equal(t, cfg.N, seen)
	page, err := s.PendingMessages(ctx, store.PageRequest{Limit: 10, Recipient: &f})
	require.NoError(t, err)
	for k, m := range page.Messages {
		require.Equal(t, int64(cfg.FilteredRow(k)+1), m.Sequence)
	}
	require.Len(t, benchseed.Plaintext(3, 200), 200)
}

func TestSkewedLayout(t *testing.T) {
	for _, tc := range []struct {
		n, recipients int
		skew          float64
	}{{1000, 100, 1.5}, {100_000, 1000, 1.5}, {50, 100, 1.5}, {1000, 10, 0.5}} {
		t.Run(fmt.Sprintf("n=%d/r=%d", tc.n, tc.recipients), func(t *testing.T) {
			l := benchseed.Config{N: tc.n, Recipients: tc.recipients, Skew: tc.skew}.Normalized().Layout()
			require.Equal(t, tc.n, l.N())
			require.Equal(t, min(tc.n, tc.recipients), l.Recipients())
			seen := make([]int, l.Recipients())
			total := 0
			for r := range l.Recipients() {
				require.Positive(t, l.Share(r), "every recipient holds a row")
				if r > 0 {
					require.LessOrEqual(t, l.Share(r), l.Share(0), "recipient 0 holds the most")
				}
				prev := -1
				for k := range l.Share(r) {
					i := l.RecipientRow(r, k)
					require.Greater(t, i, prev, "a recipient's rows ascend")
					prev = i
					addr, id := l.Row(i)
					require.Equal(t, l.Address(r), addr)
					require.Equal(t, benchseed.RowID(i), id)
					seen[r]++
				}
				total += l.Share(r)
			}
			require.Equal(t, tc.n, total, "every row belongs to one recipient")
			shares := l.Shares()
			require.Equal(t, shares[0], l.Share(0))
			require.True(t, slices.IsSortedFunc(shares, func(a, b int) int { return b - a }))
		})
	}
	// The spread the benchmark relies on: at 1M over 1,000 recipients
	// some hold 10,000+, some a dozen.
	l := benchseed.Config{N: 1_000_000, Recipients: 1000, Skew: 1.5}.Normalized().Layout()
	shares := l.Shares()
	require.Greater(t, shares[9], 10_000)
	require.Less(t, shares[len(shares)-1], 20)
	// Rows of one recipient are scattered, not clustered: recipient 20's
	// rows span most of the sequence.
	require.Less(t, l.RecipientRow(20, 0), 100_000)
	require.Greater(t, l.RecipientRow(20, l.Share(20)-1), 900_000)
}

func TestEvenLayoutMatchesRow(t *testing.T) {
	cfg := benchseed.Config{N: 3000, Recipients: 7}.Normalized()
	l := cfg.Layout()
	for i := range cfg.N {
		ra, ia := cfg.Row(i)
		rb, ib := l.Row(i)
		require.Equal(t, ra, rb)
		require.Equal(t, ia, ib)
	}
	require.Equal(t, cfg.Share, l.Share(0))
	for k := range cfg.Share {
		require.Equal(t, cfg.FilteredRow(k), l.RecipientRow(0, k))
	}
}

// TestSeedRefusesNonEmptyTable: seeding a table that already holds rows
// is refused before anything is written (sequences would not be i+1).
func TestSeedRefusesNonEmptyTable(t *testing.T) {
	ctx := context.Background()
	keys, err := benchseed.NewKeyring()
	require.NoError(t, err)
	cfg := benchseed.Config{N: 20, Recipients: 3}.Normalized()
	s, err := benchseed.Open(ctx, filepath.Join(t.TempDir(), "seed.db"), keys, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	err = benchseed.Seed(ctx, sqliteaccess.DB(s), keys, cfg)
	require.ErrorContains(t, err, "pending table holds 20 rows, want an empty one")
	n, err := s.PendingMessageCount(ctx, nil)
	require.NoError(t, err)
	require.EqualValues(t, 20, n, "nothing inserted")
}

// Victims name rows that are in the database, in either layout: every
// delete finds its message, and its replacement keeps the count.
func TestVictimsNameSeededRows(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cfg  benchseed.Config
	}{
		{"even", benchseed.Config{N: 200, Recipients: 7}},
		{"skewed", benchseed.Config{N: 200, Recipients: 7, Skew: benchseed.DefaultSkew}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, err := benchseed.NewKeyring()
			require.NoError(t, err)
			cfg := tc.cfg.Normalized()
			s, err := benchseed.Open(ctx, filepath.Join(t.TempDir(), "victims.db"), keys, cfg)
			require.NoError(t, err)
			defer s.Close()
			v := benchseed.NewVictims(cfg, cfg.N)
			for range cfg.N + 10 { // every seeded row, then replacements
				slot, r, id := v.Next()
				ok, err := s.AbandonPending(ctx, r, id)
				require.NoError(t, err)
				require.True(t, ok, "victim %s %x is pending", r, id)
				require.NoError(t, v.Replace(ctx, s, slot))
			}
			n, err := s.PendingMessageCount(ctx, nil)
			require.NoError(t, err)
			require.EqualValues(t, cfg.N, n)
		})
	}
}
