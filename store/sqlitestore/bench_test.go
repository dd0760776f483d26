package sqlitestore_test

// Benchmarks of the pending outbound queue, for benchstat
// comparisons between commits:
//
//	go test -run '^$' -bench . -count 6 ./store/sqlitestore/ > new.txt
//	PENDINGBENCH_LARGE=1000000 go test -run '^$' -bench . ./store/sqlitestore/
//
// The large size defaults to 100,000 pending (quick); PENDINGBENCH_LARGE
// sets it. cmd/pendingbench measures the same operations as ratios in one
// run against the targets in BENCHMARKS.md. Nothing here runs without
// -bench.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/rowseal"
	"github.com/securemsg/storage/internal/sealaccess"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/testkit/benchseed"
	"github.com/securemsg/storage/store/sqlitestore"

	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

type benchDB struct {
	name string
	cfg  benchseed.Config
	s    *sqlitestore.Store
	keys *seal.Keyring
	// victims is shared by every deleting sub-benchmark, so that each
	// deletes messages still pending.
	victims *benchseed.Victims
}

// benchDBs seeds the small (1,000) and large databases once for one
// top-level benchmark and closes them at its end.
func benchDBs(b *testing.B) []*benchDB {
	b.Helper()
	ctx := context.Background()
	var out []*benchDB
	for _, n := range []int{1000, benchseed.EnvSize(benchseed.LargeEnv, benchseed.DefaultLargeBench)} {
		keys, err := benchseed.NewKeyring()
		if err != nil {
			b.Fatal(err)
		}
		cfg := benchseed.Config{N: n}.Normalized()
		s, err := benchseed.Open(ctx, filepath.Join(b.TempDir(), fmt.Sprintf("pending-%d.db", n)), keys, cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		out = append(out, &benchDB{name: fmt.Sprintf("N=%d", n), cfg: cfg, s: s, keys: keys, victims: benchseed.NewVictims(cfg, cfg.N)})
	}
	return out
}

// benchCursors is how many random cursors a page benchmark cycles
// through: far more pages than SQLite's page cache holds.
const benchCursors = 4096

// randomRows returns benchCursors row indices drawn uniformly over the
// whole table of n rows, each followed by a full page and its probe row,
// from a fixed seed so that runs compare.
func randomRows(n int) []int {
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	out := make([]int, benchCursors)
	for j := range out {
		out[j] = rng.IntN(n - store.MaxPageSize - 1)
	}
	return out
}

// filteredRandom returns cursor rows of the filtered recipient drawn
// uniformly over its whole share, each followed by at least 101 of its
// messages.
func filteredRandom(cfg benchseed.Config) []int {
	rng := rand.New(rand.NewPCG(uint64(cfg.N), 2))
	out := make([]int, benchCursors)
	for j := range out {
		out[j] = cfg.FilteredRow(rng.IntN(cfg.Share - store.MaxPageSize - 1))
	}
	return out
}

// band returns benchCursors row indices drawn uniformly over the eighth of
// the table below row pos.
func band(pos int) []int {
	rng := rand.New(rand.NewPCG(uint64(pos), 3))
	out := make([]int, benchCursors)
	for j := range out {
		out[j] = pos - rng.IntN(pos/8+1)
	}
	return out
}

func benchPage(b *testing.B, d *benchDB, cursors []int, recipient *ids.DeviceAddress) {
	ctx := context.Background()
	i := 0
	for b.Loop() {
		after := int64(cursors[i%len(cursors)]) + 1
		i++
		p, err := d.s.PendingMessages(ctx, store.PageRequest{After: &after, Limit: store.MaxPageSize, Recipient: recipient})
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Messages) != store.MaxPageSize {
			b.Fatalf("page after %d: %d messages", after, len(p.Messages))
		}
	}
}

const pageColumns = "sequence, recipient_user_id, recipient_device_id, logical_id, sealed"

// rawPage reads 101 rows with query (args) on the store's own connection
// and opens the first 100: the floor a store page is compared with.
func rawPage(ctx context.Context, d *benchDB, query string, args ...any) error {
	rows, err := sqliteaccess.DB(d.s).QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var (
			seq, device int64
			user        string
			lid, sealed []byte
		)
		if err := rows.Scan(&seq, &user, &device, &lid, &sealed); err != nil {
			return err
		}
		if n++; n > store.MaxPageSize {
			continue
		}
		id, err := ids.ParseLogicalMessageID(lid)
		if err != nil {
			return err
		}
		if _, err := d.keys.Open(seal.RecordPendingOutbound, rowseal.MessageAD(ids.DeviceAddress{UserID: user, DeviceID: device}, id), sealed); err != nil {
			return err
		}
	}
	if n != store.MaxPageSize+1 {
		return fmt.Errorf("raw page: %d rows", n)
	}
	return rows.Err()
}

// BenchmarkPending measures the pending queue of the SQLite store at 1,000
// and at a large number of pending messages (PENDINGBENCH_LARGE, default
// 100,000) over 1,000 recipients: keyset pages at random cursors over
// the whole table (all recipients, and one recipient holding its own
// share, over its whole share), the raw floor of a page, the OFFSET
// baseline in the eighth of the large table below 90%, counts against a
// raw count(*), and deletes (AbandonPending, CommitAck) of a different existing message per
// iteration, re-inserted outside the timed region.
func BenchmarkPending(b *testing.B) {
	dbs := benchDBs(b)
	ctx := context.Background()
	f := benchseed.Filtered()
	for _, d := range dbs {
		b.Run("page-all/"+d.name, func(b *testing.B) { benchPage(b, d, randomRows(d.cfg.N), nil) })
	}
	for _, d := range dbs {
		b.Run("page-recipient/"+d.name, func(b *testing.B) { benchPage(b, d, filteredRandom(d.cfg), &f) })
	}
	for _, d := range dbs {
		b.Run("page-raw-floor/"+d.name, func(b *testing.B) {
			cursors, i := randomRows(d.cfg.N), 0
			for b.Loop() {
				after := int64(cursors[i%len(cursors)]) + 1
				i++
				if err := rawPage(ctx, d, "SELECT "+pageColumns+" FROM pending_outbound_message WHERE sequence > ? ORDER BY sequence LIMIT ?", after, store.MaxPageSize+1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	large := dbs[len(dbs)-1]
	pos := large.cfg.N * 9 / 10
	b.Run(fmt.Sprintf("page-at-90pct/keyset/%s", large.name), func(b *testing.B) { benchPage(b, large, band(pos), nil) })
	b.Run(fmt.Sprintf("page-at-90pct/offset/%s", large.name), func(b *testing.B) {
		// The baseline the store never uses: OFFSET lives
		// only in benchmark code.
		cursors, i := band(pos), 0
		for b.Loop() {
			at := cursors[i%len(cursors)] + 1
			i++
			if err := rawPage(ctx, large, "SELECT "+pageColumns+" FROM pending_outbound_message ORDER BY sequence LIMIT ? OFFSET ?", store.MaxPageSize+1, at); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, d := range dbs {
		b.Run("count/store/"+d.name, func(b *testing.B) {
			opens := sealaccess.Opens(d.keys)
			for b.Loop() {
				if n, err := d.s.PendingMessageCount(ctx, nil); err != nil || n != int64(d.cfg.N) {
					b.Fatal(n, err)
				}
			}
			if sealaccess.Opens(d.keys) != opens {
				b.Fatalf("count opened %d records", sealaccess.Opens(d.keys)-opens)
			}
		})
		b.Run("count/raw/"+d.name, func(b *testing.B) {
			q := db.New(sqliteaccess.DB(d.s))
			for b.Loop() {
				if _, err := q.CountPendingOutbound(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, d := range dbs {
		b.Run("count-recipient/store/"+d.name, func(b *testing.B) {
			for b.Loop() {
				if n, err := d.s.PendingMessageCount(ctx, &f); err != nil || n != int64(d.cfg.Share) {
					b.Fatal(n, err)
				}
			}
		})
	}
	session := []byte("benchmark session state, opaque to the store")
	for _, op := range []struct {
		name string
		del  func(d *benchDB, r ids.DeviceAddress, id ids.LogicalMessageID) (bool, error)
	}{
		{"delete", func(d *benchDB, r ids.DeviceAddress, id ids.LogicalMessageID) (bool, error) {
			return d.s.AbandonPending(ctx, r, id)
		}},
		{"commit-ack", func(d *benchDB, r ids.DeviceAddress, id ids.LogicalMessageID) (bool, error) {
			return d.s.CommitAck(ctx, r, id, store.Inbound{Update: store.PeerState{Session: session}})
		}},
	} {
		for _, d := range dbs {
			b.Run(op.name+"/"+d.name, func(b *testing.B) {
				v := d.victims
				for b.Loop() {
					slot, r, id := v.Next()
					ok, err := op.del(d, r, id)
					if err != nil || !ok {
						b.Fatal(ok, err)
					}
					b.StopTimer()
					if err := v.Replace(ctx, d.s, slot); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			})
		}
	}
}
