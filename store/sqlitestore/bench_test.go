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

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/testkit/benchseed"
	"github.com/securemsg/storage/internal/testkit/sealspy"
	"github.com/securemsg/storage/store/sqlitestore"

	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

type benchDB struct {
	name   string
	cfg    benchseed.Config
	layout *benchseed.Layout
	s      *sqlitestore.Store
	keys   *sealspy.Keyring // counts the records the store opens
	// victims is shared by every deleting sub-benchmark, so that each
	// deletes messages still pending.
	victims *benchseed.Victims
}

// benchDBs seeds the small (1,000) and large databases once for one
// top-level benchmark and closes them at its end, with the skewed layout
// cmd/pendingbench seeds (benchseed.DefaultSkew, a tenth as many
// recipients as messages up to 1,000): a few recipients hold most of the
// queue and most hold a handful, each one's rows scattered over the
// whole sequence.
func benchDBs(b *testing.B) []*benchDB {
	b.Helper()
	ctx := context.Background()
	var out []*benchDB
	for _, n := range []int{1000, benchseed.EnvSize(benchseed.LargeEnv, benchseed.DefaultLargeBench)} {
		kr, err := benchseed.NewKeyring()
		if err != nil {
			b.Fatal(err)
		}
		keys := sealspy.New(kr)
		cfg := benchseed.Config{N: n, Recipients: min(benchseed.DefaultRecipients, max(2, n/10)), Skew: benchseed.DefaultSkew}.Normalized()
		l := cfg.Layout()
		s, err := benchseed.OpenLayout(ctx, filepath.Join(b.TempDir(), fmt.Sprintf("pending-%d.db", n)), keys, l)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		out = append(out, &benchDB{name: fmt.Sprintf("N=%d", n), cfg: cfg, layout: l, s: s, keys: keys, victims: benchseed.NewVictims(cfg, cfg.N)})
	}
	return out
}

// benchCursors is how many random cursors a page benchmark cycles
// through: far more pages than SQLite's page cache holds.
const benchCursors = 4096

// benchCursor is where a benchmarked page starts: after row (0-based, so
// after sequence row+1), for one recipient or (nil) all.
type benchCursor struct {
	row       int
	recipient *store.DeviceAddress
}

// randomRows returns benchCursors cursors drawn uniformly over the whole
// table of n rows, each followed by a full page and its probe row, from a
// fixed seed so that runs compare.
func randomRows(n int) []benchCursor {
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	out := make([]benchCursor, benchCursors)
	for j := range out {
		out[j] = benchCursor{row: rng.IntN(n - store.MaxPageSize - 1)}
	}
	return out
}

// recipientRandom returns benchCursors (recipient, cursor) pairs as
// cmd/pendingbench draws them: a recipient uniformly among those holding
// a full page and its probe row (from a hundred messages to hundreds of
// thousands, mostly sparse ones whose rows lie in as many table pages),
// and a cursor uniformly over its whole queue, each followed by at least
// 101 of its messages.
func recipientRandom(l *benchseed.Layout) []benchCursor {
	rng := rand.New(rand.NewPCG(uint64(l.N()), 2))
	eligible := l.WithAtLeast(store.MaxPageSize + 2)
	out := make([]benchCursor, benchCursors)
	for j := range out {
		r := eligible[rng.IntN(len(eligible))]
		addr := l.Address(r)
		out[j] = benchCursor{row: l.RecipientRow(r, rng.IntN(l.Share(r)-store.MaxPageSize-1)), recipient: &addr}
	}
	return out
}

// recipientsByShare returns benchCursors recipients, each the recipient
// of a row drawn uniformly over the table: a recipient is drawn as often
// as it holds messages, as a user reads the queue of whoever it writes to.
func recipientsByShare(l *benchseed.Layout) []store.DeviceAddress {
	rng := rand.New(rand.NewPCG(uint64(l.N()), 4))
	out := make([]store.DeviceAddress, benchCursors)
	for j := range out {
		out[j], _ = l.Row(rng.IntN(l.N()))
	}
	return out
}

// band returns benchCursors cursors drawn uniformly over the eighth of
// the table below row pos.
func band(pos int) []benchCursor {
	rng := rand.New(rand.NewPCG(uint64(pos), 3))
	out := make([]benchCursor, benchCursors)
	for j := range out {
		out[j] = benchCursor{row: pos - rng.IntN(pos/8+1)}
	}
	return out
}

func benchPage(b *testing.B, d *benchDB, cursors []benchCursor) {
	ctx := context.Background()
	i := 0
	for b.Loop() {
		c := cursors[i%len(cursors)]
		after := int64(c.row) + 1
		i++
		p, err := d.s.PendingMessages(ctx, store.PageRequest{After: &after, Limit: store.MaxPageSize, Recipient: c.recipient})
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
		id, err := store.ParseLogicalMessageID(lid)
		if err != nil {
			return err
		}
		if _, err := d.keys.Open(seal.RecordPendingOutbound, seal.MessageAD(user, device, id), sealed); err != nil {
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
// 100,000), seeded as benchDBs says: keyset pages at random cursors over
// the whole table (all recipients; one random recipient, over its whole
// queue), the raw floor of a page, the OFFSET baseline in the eighth of
// the large table below 90%, counts against a raw count(*), a recipient's
// count (recipients drawn by share), and deletes (AbandonPending,
// CommitAck) of a different existing message per iteration, re-inserted
// outside the timed region.
func BenchmarkPending(b *testing.B) {
	dbs := benchDBs(b)
	ctx := context.Background()
	for _, d := range dbs {
		b.Run("page-all/"+d.name, func(b *testing.B) { benchPage(b, d, randomRows(d.cfg.N)) })
	}
	for _, d := range dbs {
		b.Run("page-recipient/"+d.name, func(b *testing.B) { benchPage(b, d, recipientRandom(d.layout)) })
	}
	for _, d := range dbs {
		b.Run("page-raw-floor/"+d.name, func(b *testing.B) {
			cursors, i := randomRows(d.cfg.N), 0
			for b.Loop() {
				after := int64(cursors[i%len(cursors)].row) + 1
				i++
				if err := rawPage(ctx, d, "SELECT "+pageColumns+" FROM pending_outbound_message WHERE sequence > ? ORDER BY sequence LIMIT ?", after, store.MaxPageSize+1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	large := dbs[len(dbs)-1]
	pos := large.cfg.N * 9 / 10
	b.Run(fmt.Sprintf("page-at-90pct/keyset/%s", large.name), func(b *testing.B) { benchPage(b, large, band(pos)) })
	b.Run(fmt.Sprintf("page-at-90pct/offset/%s", large.name), func(b *testing.B) {
		// The baseline the store never uses: OFFSET lives
		// only in benchmark code.
		cursors, i := band(pos), 0
		for b.Loop() {
			at := cursors[i%len(cursors)].row + 1
			i++
			if err := rawPage(ctx, large, "SELECT "+pageColumns+" FROM pending_outbound_message ORDER BY sequence LIMIT ? OFFSET ?", store.MaxPageSize+1, at); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, d := range dbs {
		b.Run("count/store/"+d.name, func(b *testing.B) {
			opens := d.keys.Opens()
			for b.Loop() {
				if n, err := d.s.PendingMessageCount(ctx, nil); err != nil || n != int64(d.cfg.N) {
					b.Fatal(n, err)
				}
			}
			if d.keys.Opens() != opens {
				b.Fatalf("count opened %d records", d.keys.Opens()-opens)
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
			rs, i := recipientsByShare(d.layout), 0
			want := map[store.DeviceAddress]int64{}
			for r := range d.layout.Recipients() {
				want[d.layout.Address(r)] = int64(d.layout.Share(r))
			}
			for b.Loop() {
				r := rs[i%len(rs)]
				i++
				if n, err := d.s.PendingMessageCount(ctx, &r); err != nil || n != want[r] {
					b.Fatal(r, n, err)
				}
			}
		})
	}
	session := []byte("benchmark session state, opaque to the store")
	for _, op := range []struct {
		name string
		del  func(d *benchDB, r store.DeviceAddress, id store.LogicalMessageID) (bool, error)
	}{
		{"delete", func(d *benchDB, r store.DeviceAddress, id store.LogicalMessageID) (bool, error) {
			return d.s.AbandonPending(ctx, r, id)
		}},
		{"commit-ack", func(d *benchDB, r store.DeviceAddress, id store.LogicalMessageID) (bool, error) {
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
