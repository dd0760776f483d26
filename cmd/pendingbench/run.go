package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/internal/benchseed"
	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/memstore"
	"github.com/securemsg/storage/store/sqlitestore"
	"github.com/securemsg/storage/transport"
)

// sample is a set of timings of one side of a comparison.
type sample []time.Duration

func (s sample) median() time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

// timed runs f once and returns how long it took.
func timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}

// interleave times a and b iters times each, alternating which side goes
// first, so that drift on the shared machine hits both sides alike. Each
// side gets its round number; prep, if set, runs untimed before each
// round.
func interleave(iters int, a, b func(round int) error) (sa, sb sample, err error) {
	sa, sb = make(sample, 0, iters), make(sample, 0, iters)
	for r := range iters {
		first, second := a, b
		if r%2 == 1 {
			first, second = b, a
		}
		d1, err := timed(func() error { return first(r) })
		if err != nil {
			return nil, nil, err
		}
		d2, err := timed(func() error { return second(r) })
		if err != nil {
			return nil, nil, err
		}
		if r%2 == 1 {
			d1, d2 = d2, d1
		}
		sa, sb = append(sa, d1), append(sb, d2)
	}
	return sa, sb, nil
}

// env is one seeded database.
type env struct {
	n    int
	cfg  benchseed.Config
	s    *sqlitestore.Store
	keys *seal.Keyring
}

// seq is the sequence of row i.
func (e *env) seq(i int) int64 { return int64(i) + 1 }

// rawDB is the store's own connection, for the raw baselines: same driver,
// same connection and page cache, no store code in between.
func (e *env) rawDB() *sql.DB { return e.s.DB() }

// positions returns k cursor rows spread over the middle quarter of 0..n-1
// (centre c, half-width w), for pages taken at comparable places.
func positions(c, w, k int) []int {
	out := make([]int, k)
	for j := range out {
		if k == 1 {
			out[j] = c
			continue
		}
		out[j] = c - w + j*2*w/(k-1)
	}
	return out
}

// allCursors are row indices in the middle of the sequence, for pages of
// all recipients.
func (e *env) allCursors() []int {
	return positions(e.n/2, e.n/8, 16)
}

// filteredCursors are cursor rows for pages of the filtered recipient:
// its own messages around the middle of its share, so that every page
// returns a full 100 plus the probe row.
func (e *env) filteredCursors() []int {
	page := store.MaxPageSize + 1
	c := (e.cfg.Share - page) / 2
	w := min(e.cfg.Share/8, c)
	ks := positions(c, w, 16)
	out := make([]int, len(ks))
	for j, k := range ks {
		out[j] = e.cfg.FilteredRow(k)
	}
	return out
}

func run(ctx context.Context, o options, out, progress io.Writer) (met, total int, err error) {
	if err := o.validate(); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	dir, err := os.MkdirTemp(o.Dir, "pendingbench-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	logf := func(format string, args ...any) { fmt.Fprintf(progress, format+"\n", args...) }

	open := func(name string, n int) (*env, error) {
		keys, err := benchseed.NewKeyring()
		if err != nil {
			return nil, err
		}
		cfg := benchseed.Config{N: n, Recipients: o.Recipients}.Normalized()
		t0 := time.Now()
		s, err := benchseed.Open(ctx, filepath.Join(dir, name+".db"), keys, cfg)
		if err != nil {
			return nil, fmt.Errorf("seed %s: %w", name, err)
		}
		logf("seeded %s: %d pending over %d recipients (filtered recipient: %d) in %s", name, n, cfg.Recipients, cfg.Share, time.Since(t0).Round(time.Millisecond))
		return &env{n: n, cfg: cfg, s: s, keys: keys}, nil
	}
	var envs []*env
	defer func() {
		for _, e := range envs {
			e.s.Close()
		}
	}()
	small, err := open("small", o.Small)
	if err != nil {
		return 0, 0, err
	}
	envs = append(envs, small)
	mid, err := open("mid", o.Mid)
	if err != nil {
		return 0, 0, err
	}
	envs = append(envs, mid)
	large, err := open("large", o.Large)
	if err != nil {
		return 0, 0, err
	}
	envs = append(envs, large)

	var rs []result
	add := func(r ...result) { rs = append(rs, r...) }
	S, L := human(o.Small), human(o.Large)

	// Heap first, while the process holds little else.
	logf("heap walk")
	hMid, err := heapWalk(ctx, mid)
	if err != nil {
		return 0, 0, err
	}
	hLarge, err := heapWalk(ctx, large)
	if err != nil {
		return 0, 0, err
	}
	const heapLimit = 16
	for _, h := range []struct {
		n int
		w walk
	}{{o.Mid, hMid}, {o.Large, hLarge}} {
		add(result{Name: fmt.Sprintf("heap growth walking all %s pending (pages of 100)", human(h.n)), Measured: h.w.growthMiB(), Unit: "MiB",
			Target: fmt.Sprintf("< %d MiB", heapLimit), Pass: h.w.growthMiB() < heapLimit,
			Detail: fmt.Sprintf("max HeapAlloc-baseline over %d pages (sampled every %d); max HeapInuse-baseline %.2f MiB; %d GCs", h.w.pages, h.w.every, h.w.inuseMiB(), h.w.gcs)})
	}

	logf("pages")
	pageAt := func(e *env, cursors []int, recipient *ids.DeviceAddress) func(int) error {
		return func(r int) error {
			i := cursors[r%len(cursors)]
			p, err := e.s.PagePending(ctx, store.PageRequest{After: e.seq(i), Limit: store.MaxPageSize, Recipient: recipient})
			if err != nil {
				return err
			}
			if len(p.Messages) != store.MaxPageSize || p.Next == nil {
				return fmt.Errorf("page after %d of %d: %d messages", e.seq(i), e.n, len(p.Messages))
			}
			return nil
		}
	}
	a, b, err := interleave(o.Iters, pageAt(large, large.allCursors(), nil), pageAt(small, small.allCursors(), nil))
	if err != nil {
		return 0, 0, err
	}
	add(ratioLE(fmt.Sprintf("page of 100, all recipients: %s / %s pending", L, S), a, b, 1.3, ", middle of the sequence"))
	f := benchseed.Filtered()
	a, b, err = interleave(o.Iters, pageAt(large, large.filteredCursors(), &f), pageAt(small, small.filteredCursors(), &f))
	if err != nil {
		return 0, 0, err
	}
	add(ratioLE(fmt.Sprintf("page of 100, one recipient: %s / %s pending", L, S), a, b, 1.3,
		fmt.Sprintf(", recipient holds %d / %d, middle of its share", large.cfg.Share, small.cfg.Share)))

	logf("OFFSET baseline")
	pos := int(float64(o.Large) * o.OffsetAt)
	a, b, err = interleave(o.SlowIters, func(int) error { return offsetPage(ctx, large, pos) },
		func(int) error { return pageAt(large, []int{pos}, nil)(0) })
	if err != nil {
		return 0, 0, err
	}
	add(ratioGE(fmt.Sprintf("OFFSET page / keyset page at position %s", human(pos)), a, b, 50, ", both 101 rows read, 100 opened"))

	logf("count")
	opens0 := large.keys.Opens()
	a, b, err = interleave(o.SlowIters, func(int) error {
		n, err := large.s.CountPending(ctx, nil)
		if err == nil && n != int64(o.Large) {
			err = fmt.Errorf("count %d, want %d", n, o.Large)
		}
		return err
	}, func(int) error {
		var n int64
		return large.rawDB().QueryRowContext(ctx, "SELECT count(*) FROM pending_outbound_message").Scan(&n)
	})
	if err != nil {
		return 0, 0, err
	}
	if _, err := large.s.CountPending(ctx, &f); err != nil {
		return 0, 0, err
	}
	opened := large.keys.Opens() - opens0
	add(ratioLE(fmt.Sprintf("count at %s / raw SELECT count(*)", L), a, b, 1.2, ""))
	add(result{Name: "records opened by count (all + one recipient)", Measured: float64(opened), Target: "0", Pass: opened == 0,
		Detail: fmt.Sprintf("Keyring.Opens() delta over %d counts", o.SlowIters+1)})

	logf("page vs raw select + opens")
	cursors := large.allCursors()
	a, b, err = interleave(o.Iters, pageAt(large, cursors, nil), func(r int) error {
		return rawPage(ctx, large, large.seq(cursors[r%len(cursors)]))
	})
	if err != nil {
		return 0, 0, err
	}
	add(ratioLE(fmt.Sprintf("page / (raw select 101 rows + 100 Keyring.Open) at %s", L), a, b, 1.5, ""))

	logf("abandon and ACK")
	dmlIters := min(o.DMLIters, o.Small/3) // three disjoint victim sets
	for set, op := range []struct {
		name string
		fn   func(e *env, c *client.Client, r ids.DeviceAddress, id ids.LogicalMessageID) (bool, error)
	}{
		{"abandon (client.AbandonPending)", func(e *env, c *client.Client, r ids.DeviceAddress, id ids.LogicalMessageID) (bool, error) {
			st, err := c.AbandonPending(ctx, r, id)
			return st == client.Abandoned, err
		}},
		{"ACK-delete (store CommitAck)", func(e *env, _ *client.Client, r ids.DeviceAddress, id ids.LogicalMessageID) (bool, error) {
			return e.s.CommitAck(ctx, r, id, store.Inbound{Update: store.PeerState{Session: ackSession}})
		}},
		{"delete (store DeletePending)", func(e *env, _ *client.Client, r ids.DeviceAddress, id ids.LogicalMessageID) (bool, error) {
			return e.s.DeletePending(ctx, r, id)
		}},
	} {
		a, b, err = deleteBench(ctx, small, large, dmlIters, set, op.fn)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", op.name, err)
		}
		add(ratioLE(fmt.Sprintf("%s: %s / %s pending", op.name, L, S), a, b, 1.3, ", victims spread over the table, re-inserted untimed"))
	}

	logf("send")
	sendR, err := sendBench(ctx, dir, o.DMLIters)
	if err != nil {
		return 0, 0, fmt.Errorf("send: %w", err)
	}
	add(sendR)
	if err := fanoutBench(ctx, dir, o.Mid, o.DMLIters, add); err != nil {
		return 0, 0, fmt.Errorf("fan-out send: %w", err)
	}

	met = printTable(out, o, rs, time.Since(start))
	return met, len(rs), nil
}

var ackSession = []byte("benchmark session state: opaque to the store, sealed at rest, about one hundred bytes long.......")

// offsetPage is the baseline: the page at position pos read with OFFSET
// (101 rows, as the store reads limit+1), its 100 returned rows opened.
func offsetPage(ctx context.Context, e *env, pos int) error {
	rows, err := e.rawDB().QueryContext(ctx, `SELECT sequence, recipient_user_id, recipient_device_id, logical_id, sealed
FROM pending_outbound_message ORDER BY sequence LIMIT ? OFFSET ?`, store.MaxPageSize+1, pos)
	if err != nil {
		return err
	}
	return openRows(e, rows, pos)
}

// rawPage is the floor of a page: the keyset select of the same 101 rows
// straight on the connection, and 100 Keyring.Open calls.
func rawPage(ctx context.Context, e *env, after int64) error {
	rows, err := e.rawDB().QueryContext(ctx, `SELECT sequence, recipient_user_id, recipient_device_id, logical_id, sealed
FROM pending_outbound_message WHERE sequence > ? ORDER BY sequence LIMIT ?`, after, store.MaxPageSize+1)
	if err != nil {
		return err
	}
	return openRows(e, rows, int(after))
}

func openRows(e *env, rows *sql.Rows, firstRow int) error {
	defer rows.Close()
	n := 0
	for rows.Next() {
		var (
			seq    int64
			user   string
			device int64
			lid    []byte
			sealed []byte
		)
		if err := rows.Scan(&seq, &user, &device, &lid, &sealed); err != nil {
			return err
		}
		n++
		if n > store.MaxPageSize {
			continue // the probe row is read, not opened
		}
		if seq != int64(firstRow)+int64(n) {
			return fmt.Errorf("raw page: row %d has sequence %d", firstRow+n, seq)
		}
		var id ids.LogicalMessageID
		copy(id[:], lid)
		if _, err := e.keys.Open(seal.RecordPendingOutbound, store.MessageAD(ids.DeviceAddress{UserID: user, DeviceID: device}, id), sealed); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if n != store.MaxPageSize+1 {
		return fmt.Errorf("raw page: %d rows", n)
	}
	return rows.Close()
}

// victims returns iters distinct rows spread over the whole table of e;
// set picks a disjoint family, so that each operation deletes rows no
// other one touched.
func victims(e *env, iters, set int) []int {
	out := make([]int, iters)
	stride := e.n / iters
	for j := range out {
		out[j] = j*stride + set%max(stride, 1)
	}
	return out
}

// deleteBench times del on a different existing message of small and of
// large in each round, re-inserting a replacement (a new message for the
// same recipient) outside the timed region so that both tables keep
// their size.
func deleteBench(ctx context.Context, small, large *env, iters, set int,
	del func(e *env, c *client.Client, r ids.DeviceAddress, id ids.LogicalMessageID) (bool, error)) (sample, sample, error) {
	net := transport.NewNetwork()
	side := func(e *env) (func(int) error, func(int) error, error) {
		c, err := client.New(client.Config{Store: e.s, Transport: net, Directory: net})
		if err != nil {
			return nil, nil, err
		}
		if err := c.Initialize(ctx, ids.DeviceAddress{UserID: "bench-self", DeviceID: 1}); err != nil {
			return nil, nil, err
		}
		vs := victims(e, iters, set)
		timedDel := func(r int) error {
			rcpt, id := e.cfg.Row(vs[r])
			ok, err := del(e, c, rcpt, id)
			if err == nil && !ok {
				err = fmt.Errorf("row %d was not pending", vs[r])
			}
			return err
		}
		reinsert := func(r int) error {
			rcpt, id := e.cfg.Row(vs[r])
			copy(id[:8], fmt.Sprintf("re%06d", set%1_000_000))
			sealed, err := benchseed.SealRow(e.keys, rcpt, id, benchseed.Plaintext(vs[r], e.cfg.PlaintextSize))
			if err != nil {
				return err
			}
			_, err = db.New(e.rawDB()).InsertPendingOutbound(ctx, db.InsertPendingOutboundParams{
				RecipientUserID: rcpt.UserID, RecipientDeviceID: rcpt.DeviceID, LogicalID: id[:], Sealed: sealed,
			})
			return err
		}
		return timedDel, reinsert, nil
	}
	ds, rs, err := side(small)
	if err != nil {
		return nil, nil, err
	}
	dl, rl, err := side(large)
	if err != nil {
		return nil, nil, err
	}
	var sl, ss sample
	for r := range iters {
		first, second := dl, ds
		if r%2 == 1 {
			first, second = ds, dl
		}
		d1, err := timed(func() error { return first(r) })
		if err != nil {
			return nil, nil, err
		}
		d2, err := timed(func() error { return second(r) })
		if err != nil {
			return nil, nil, err
		}
		if r%2 == 1 {
			d1, d2 = d2, d1
		}
		sl, ss = append(sl, d1), append(ss, d2)
		if err := errors.Join(rs(r), rl(r)); err != nil {
			return nil, nil, err
		}
	}
	return sl, ss, nil
}

// sendBench times client.Send to a peer with an established session
// against a raw insert of the same sealed bytes in its own transaction,
// on a database of its own.
func sendBench(ctx context.Context, dir string, iters int) (result, error) {
	keys, err := benchseed.NewKeyring()
	if err != nil {
		return result{}, err
	}
	s, err := sqlitestore.Open(ctx, filepath.Join(dir, "send.db"), keys)
	if err != nil {
		return result{}, err
	}
	defer s.Close()
	net := transport.NewNetwork()
	aAddr, bAddr := ids.DeviceAddress{UserID: "bench-alice", DeviceID: 1}, ids.DeviceAddress{UserID: "bench-bob", DeviceID: 1}
	a, err := client.New(client.Config{Store: s, Transport: net, Directory: net})
	if err != nil {
		return result{}, err
	}
	bKeys, err := benchseed.NewKeyring()
	if err != nil {
		return result{}, err
	}
	b, err := client.New(client.Config{Store: memstore.New(bKeys), Transport: net, Directory: net})
	if err != nil {
		return result{}, err
	}
	if err := errors.Join(a.Initialize(ctx, aAddr), b.Initialize(ctx, bAddr)); err != nil {
		return result{}, err
	}
	// Establish the session both ways: a message, its ACK, a reply.
	if _, err := a.Send(ctx, bAddr, []byte("hello")); err != nil {
		return result{}, err
	}
	if _, err := b.Poll(ctx); err != nil {
		return result{}, err
	}
	if _, err := a.Poll(ctx); err != nil {
		return result{}, err
	}
	if _, err := b.Send(ctx, aAddr, []byte("hello back")); err != nil {
		return result{}, err
	}
	if _, err := a.Poll(ctx); err != nil {
		return result{}, err
	}
	if _, err := b.Poll(ctx); err != nil {
		return result{}, err
	}
	pt := benchseed.Plaintext(0, benchseed.DefaultPlaintextSize)
	sealed, err := benchseed.SealRow(keys, bAddr, ids.NewLogicalMessageID(), pt)
	if err != nil {
		return result{}, err
	}
	send := func(int) error { _, err := a.Send(ctx, bAddr, pt); return err }
	raw := func(int) error {
		id := ids.NewLogicalMessageID()
		return sqltx.Run(ctx, s.DB(), func(tx *sql.Tx) error {
			_, err := db.New(tx).InsertPendingOutbound(ctx, db.InsertPendingOutboundParams{
				RecipientUserID: bAddr.UserID, RecipientDeviceID: bAddr.DeviceID, LogicalID: id[:], Sealed: sealed,
			})
			return err
		})
	}
	var ss, sr sample
	for r := range iters {
		if r%50 == 0 { // keep the in-process mailbox and call log small, untimed
			if _, err := net.Receive(ctx, bAddr); err != nil {
				return result{}, err
			}
			net.ResetCalls()
			runtime.GC()
		}
		x, y, err := interleave(1, send, raw)
		if err != nil {
			return result{}, err
		}
		ss, sr = append(ss, x...), append(sr, y...)
	}
	return ratioGE("send throughput / raw insert throughput (raw time / send time)", sr, ss, 0.5,
		" (raw vs send); send = encrypt + seal + one tx (pending row + session) + hand-off"), nil
}

// walk is the heap measurement of one full walk of the pending pages.
type walk struct {
	pages, every   int
	growth, inuse  uint64
	gcs            uint32
	baselineHeapMB float64
}

func (w walk) growthMiB() float64 { return float64(w.growth) / (1 << 20) }
func (w walk) inuseMiB() float64  { return float64(w.inuse) / (1 << 20) }

// heapWalk walks every page of e (all recipients, 100 per page) and
// reports the largest HeapAlloc (and HeapInuse) above the baseline taken
// after a GC, sampled every few pages.
func heapWalk(ctx context.Context, e *env) (walk, error) {
	w := walk{every: 10}
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	baseAlloc, baseInuse, gc0 := ms.HeapAlloc, ms.HeapInuse, ms.NumGC
	peakAlloc, peakInuse := baseAlloc, baseInuse
	sampleNow := func() {
		runtime.ReadMemStats(&ms)
		peakAlloc, peakInuse = max(peakAlloc, ms.HeapAlloc), max(peakInuse, ms.HeapInuse)
	}
	after, total := int64(0), 0
	for {
		p, err := e.s.PagePending(ctx, store.PageRequest{After: after, Limit: store.MaxPageSize})
		if err != nil {
			return w, err
		}
		total += len(p.Messages)
		w.pages++
		if w.pages%w.every == 0 {
			sampleNow()
		}
		if p.Next == nil {
			break
		}
		after = *p.Next
	}
	sampleNow()
	if total != e.n {
		return w, fmt.Errorf("heap walk saw %d of %d messages", total, e.n)
	}
	w.growth, w.inuse, w.gcs = peakAlloc-baseAlloc, peakInuse-baseInuse, ms.NumGC-gc0
	w.baselineHeapMB = float64(baseAlloc) / (1 << 20)
	return w, nil
}
