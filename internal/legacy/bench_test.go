package legacy_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/internal/testkit/benchseed"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// legacyBenchEnv lists the legacy table sizes BenchmarkLegacyOpen runs
// (comma-separated; default 100000). BENCHMARKS.md records 100000 and
// 1000000.
const legacyBenchEnv = "LEGACY_BENCH_ROWS"

// legacyBatchEnv sets the batch size (sqlitestore.WithLegacyBatch; default
// legacy.DefaultBatch), to compare batch sizes.
const legacyBatchEnv = "LEGACY_BENCH_BATCH"

// buildLegacyBench writes a legacy plaintext database of n pending rows:
// the frozen fixture (its 9 rows, keys, identity, pin, session) plus
// n-9 rows of 200-byte plaintexts to 1,000 recipients with a skewed spread
// (recipient r drawn as a squared uniform: a few recipients hold most of
// the queue), in transactions of 100,000.
func buildLegacyBench(b *testing.B, path string, n int) {
	b.Helper()
	ctx := context.Background()
	text, err := os.ReadFile(legacyFixture)
	require.NoError(b, err)
	conn, err := sql.Open(sqlitedriver.Name, sqliteaccess.DSN(path))
	require.NoError(b, err)
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	require.NoError(b, sqltx.Run(ctx, conn, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, string(text))
		return err
	}))
	rng := rand.New(rand.NewPCG(uint64(n), 13))
	for done := 9; done < n; {
		require.NoError(b, sqltx.Run(ctx, conn, func(tx *sql.Tx) error {
			stmt, err := tx.PrepareContext(ctx, "INSERT INTO pending_outbound_message (recipient_user_id, recipient_device_id, logical_id, plaintext) VALUES (?, ?, ?, ?)")
			if err != nil {
				return err
			}
			defer stmt.Close()
			for end := min(n, done+100_000); done < end; done++ {
				u := rng.Float64()
				r := int(u * u * 1000)
				id := store.NewLogicalMessageID()
				if _, err := stmt.ExecContext(ctx, fmt.Sprintf("user-%04d", r), 1, id[:], benchseed.Plaintext(done, 200)); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	_, err = conn.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	require.NoError(b, err)
}

func copyTemplate(b *testing.B, from, to string) {
	b.Helper()
	in, err := os.Open(from)
	require.NoError(b, err)
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	require.NoError(b, err)
	_, err = io.Copy(out, in)
	require.NoError(b, err)
	require.NoError(b, out.Close())
}

// BenchmarkLegacyOpen measures what a user with a legacy database meets at
// the first start after the upgrade: sqlitestore.Open on a copy of a
// legacy database evicted from the page cache, with the store's own
// settings and default batch: schema migration 15 (its index built over
// the legacy table), the key check, the batched sealing and the erase
// step (VACUUM, checkpoint). Reported: rows/s over the whole Open, rows/s
// up to the erase step (migration 15, key check and sealing), and the
// erase step's seconds.
//
//	go test -run '^$' -bench BenchmarkLegacyOpen -benchtime 1x ./internal/legacy/
//	LEGACY_BENCH_ROWS=100000,1000000 go test -run '^$' -bench BenchmarkLegacyOpen -benchtime 1x -timeout 30m ./internal/legacy/
func BenchmarkLegacyOpen(b *testing.B) {
	sizes := []int{100_000}
	if v := os.Getenv(legacyBenchEnv); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			require.NoError(b, err, legacyBenchEnv)
			require.GreaterOrEqual(b, n, 9, legacyBenchEnv)
			sizes = append(sizes, n)
		}
	}
	batch, err := strconv.Atoi(os.Getenv(legacyBatchEnv))
	if err != nil {
		batch = 0
	}
	ctx := context.Background()
	for _, n := range sizes {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			template := filepath.Join(dir, "template.db")
			buildLegacyBench(b, template, n)
			var total, sealing, erasing time.Duration
			runs := 0
			for b.Loop() {
				b.StopTimer()
				path := filepath.Join(dir, fmt.Sprintf("run%d.db", runs))
				copyTemplate(b, template, path)
				evict(b, path)
				kr := fixtureKeyring(b)
				var eraseStart time.Time
				progress := func(p store.LegacyProgress) {
					if p.Phase == store.LegacyErase {
						eraseStart = time.Now()
					}
				}
				b.StartTimer()
				began := time.Now()
				s, err := sqlitestore.Open(ctx, path, kr, sqlitestore.WithLegacyUpgrade(), sqlitestore.WithLegacyProgress(progress), sqlitestore.WithLegacyBatch(batch))
				end := time.Now()
				b.StopTimer()
				require.NoError(b, err)
				cnt, err := s.PendingMessageCount(ctx, nil)
				require.NoError(b, err)
				require.Equal(b, int64(n), cnt)
				require.NoError(b, s.Close())
				require.NoError(b, os.Remove(path))
				total += end.Sub(began)
				sealing += eraseStart.Sub(began)
				erasing += end.Sub(eraseStart)
				runs++
				b.StartTimer()
			}
			b.ReportMetric(float64(n)*float64(runs)/total.Seconds(), "rows/s")
			b.ReportMetric(float64(n)*float64(runs)/sealing.Seconds(), "seal-rows/s")
			b.ReportMetric(erasing.Seconds()/float64(runs), "erase-s")
		})
	}
}
