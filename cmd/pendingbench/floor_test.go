package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/stretchr/testify/require"
)

// TestFloorLinesGiveTheCacheBack checks that the in-memory floor runs with
// the large cache and leaves both connections with the store's own
// setting (and the -pragmas under trial) afterwards.
func TestFloorLinesGiveTheCacheBack(t *testing.T) {
	ctx := context.Background()
	b := &bench{ctx: ctx, o: options{Recipients: 20, Skew: 1.5, Iters: 3, Pragmas: "temp_store=2"}, dir: t.TempDir(),
		rng: rand.New(rand.NewPCG(1, 2)), logf: t.Logf, S: "600", L: "900"}
	var err error
	b.small, err = b.seed("small", 600)
	require.NoError(t, err)
	defer b.small.s.Close()
	b.large, err = b.seed("large", 900)
	require.NoError(t, err)
	defer b.large.s.Close()

	cacheSize := func(e *env) (n int64) {
		require.NoError(t, e.rawDB().QueryRowContext(ctx, "PRAGMA cache_size").Scan(&n))
		return n
	}
	require.NoError(t, b.large.preRead(ctx))
	require.Equal(t, int64(-floorCacheKiB), cacheSize(b.large))
	require.NoError(t, b.large.restoreCache(ctx))

	rs, err := floorLines(b)
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.True(t, rs[0].Info, "the floor has no target")
	require.Contains(t, rs[0].Name, "floor: page of 100, one recipient")
	for _, e := range []*env{b.small, b.large} {
		require.Equal(t, int64(-sqliteaccess.PageCacheKiB), cacheSize(e), e.name)
		var temp int64
		require.NoError(t, e.rawDB().QueryRowContext(ctx, "PRAGMA temp_store").Scan(&temp))
		require.Equal(t, int64(2), temp, fmt.Sprintf("%s: -pragmas applied again", e.name))
	}
}
