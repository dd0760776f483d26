package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/internal/benchpeers"
	"github.com/securemsg/storage/internal/benchseed"
	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
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

// spread is the range between the 10th and the 90th percentile.
func (s sample) spread() string {
	c := slices.Clone(s)
	slices.Sort(c)
	if len(c) == 0 {
		return ""
	}
	return fmt.Sprintf("p10-p90 %s-%s", fmtDur(c[len(c)/10]), fmtDur(c[len(c)*9/10]))
}

// timed runs f once and returns how long it took.
func timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}

// interleave times a and b iters times each, alternating which side goes
// first, so that drift on the shared machine hits both sides alike. Each
// side gets its round number.
func interleave(iters int, a, b func(round int) error) (sa, sb sample, err error) {
	return interleaveWith(iters, nil, a, b)
}

// interleaveWith is interleave with between (if not nil) run, untimed,
// before every round: the place to drain mailboxes and the like.
func interleaveWith(iters int, between func(round int) error, a, b func(round int) error) (sa, sb sample, err error) {
	timedSide := func(f func(int) error) func(int) (time.Duration, error) {
		return func(r int) (time.Duration, error) { return timed(func() error { return f(r) }) }
	}
	return alternate(iters, between, timedSide(a), timedSide(b))
}

// alternate is the loop under interleaveWith for sides that time
// themselves (each returns how long its timed part took, so that it can
// do untimed work around it).
func alternate(iters int, between func(round int) error, a, b func(round int) (time.Duration, error)) (sa, sb sample, err error) {
	sa, sb = make(sample, 0, iters), make(sample, 0, iters)
	for r := range iters {
		if between != nil {
			if err := between(r); err != nil {
				return nil, nil, err
			}
		}
		first, second := a, b
		if r%2 == 1 {
			first, second = b, a
		}
		d1, err := first(r)
		if err != nil {
			return nil, nil, err
		}
		d2, err := second(r)
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
	name   string
	n      int
	path   string
	layout *benchseed.Layout
	s      *sqlitestore.Store
	keys   *seal.Keyring
	// client is the store's client (bench-self), made on first use.
	client *client.Client
	net    *transport.Network
	// pragmas are applied to the store's connection after every open.
	pragmas []string
}

// self is the address every benchmark client runs as.
var self = ids.DeviceAddress{UserID: "bench-self", DeviceID: 1}

// seq is the sequence of row i.
func (e *env) seq(i int) int64 { return int64(i) + 1 }

// rawDB is the store's own connection, for the raw baselines: same driver,
// same connection and page cache, no store code in between. It is only
// read through, except by the raw insert floor of the send line, which
// runs last (a write through it is not seen by the store's count).
func (e *env) rawDB() *sql.DB { return e.s.DB() }

// open opens the store of e (closing it first if open) with the store's
// own settings, then the -pragmas under trial.
func (e *env) open(ctx context.Context) error {
	if e.s != nil {
		if err := e.s.Close(); err != nil {
			return err
		}
		e.s, e.client = nil, nil
	}
	s, err := sqlitestore.Open(ctx, e.path, e.keys)
	if err != nil {
		return err
	}
	e.s = s
	return e.applyPragmas(ctx)
}

func (e *env) applyPragmas(ctx context.Context) error {
	for _, p := range e.pragmas {
		if _, err := e.s.DB().ExecContext(ctx, "PRAGMA "+p); err != nil {
			return fmt.Errorf("PRAGMA %s: %w", p, err)
		}
	}
	return nil
}

// coldOpen closes the store, evicts its files from the OS page cache and
// opens it again: the next call meets a cold SQLite page cache and a cold
// OS cache, as the first call after an app start does.
func (e *env) coldOpen(ctx context.Context) error {
	if err := e.s.Close(); err != nil {
		return err
	}
	e.s, e.client = nil, nil
	if err := evict(e.path); err != nil {
		return err
	}
	return e.open(ctx)
}

// theClient returns the client over e's store, initialized as self.
func (e *env) theClient(ctx context.Context) (*client.Client, error) {
	if e.client != nil {
		return e.client, nil
	}
	c, err := client.New(client.Config{Store: e.s, Transport: e.net, Directory: e.net})
	if err != nil {
		return nil, err
	}
	if err := c.Initialize(ctx, self); err != nil {
		return nil, err
	}
	e.client = c
	return c, nil
}

// cursor is where a page starts: after sequence After, for one recipient
// or (nil) all.
type cursor struct {
	after     int64
	recipient *ids.DeviceAddress
}

// globalCursors draws k cursors uniformly over the whole sequence, each
// followed by at least a full page and its probe row.
func (e *env) globalCursors(rng *rand.Rand, k int) []cursor {
	out := make([]cursor, k)
	for j := range out {
		out[j] = cursor{after: int64(rng.IntN(e.n - store.MaxPageSize))}
	}
	return out
}

// recipientCursors draws k (recipient, cursor) pairs: a recipient
// uniformly among those holding at least a full page and its probe row
// (from a few hundred messages to hundreds of thousands), and a cursor
// uniformly over its whole queue, followed by a full page.
func (e *env) recipientCursors(rng *rand.Rand, k int) []cursor {
	eligible := e.layout.WithAtLeast(store.MaxPageSize + 1)
	out := make([]cursor, k)
	for j := range out {
		r := eligible[rng.IntN(len(eligible))]
		at := rng.IntN(e.layout.Share(r) - store.MaxPageSize)
		addr := e.layout.Address(r)
		out[j] = cursor{after: e.seq(e.layout.RecipientRow(r, at)) - 1, recipient: &addr}
	}
	return out
}

// page reads the page at c and checks it is full.
func (e *env) page(ctx context.Context, c cursor) error {
	p, err := e.s.PagePending(ctx, store.PageRequest{After: c.after, Limit: store.MaxPageSize, Recipient: c.recipient})
	if err != nil {
		return err
	}
	if len(p.Messages) != store.MaxPageSize || p.Next == nil {
		return fmt.Errorf("%s: page after %d: %d messages", e.name, c.after, len(p.Messages))
	}
	return nil
}

func (e *env) pageAt(ctx context.Context, cs []cursor) func(int) error {
	return func(r int) error { return e.page(ctx, cs[r%len(cs)]) }
}

// bench is one run: the options, the seeded databases and what every
// line needs.
type bench struct {
	ctx               context.Context
	o                 options
	dir               string
	logf              func(format string, args ...any)
	rng               *rand.Rand
	net               *transport.Network
	small, mid, large *env
	S, L              string // human sizes of small and large
	// victims hands out the rows the deleting lines delete, so that no
	// two lines pick the same message.
	victims map[*env]*victimSet
}

// line is one measurement of the table: it returns one or more results.
type line struct {
	name string
	run  func(b *bench) ([]result, error)
}

// lines are the measurements, in the order they run and print. A
// measurement defined in another file of this package joins the table
// by being listed here. The cold-cache lines reopen the stores, so they
// come after the warm ones; the send lines write through the raw
// connection, so they come last.
var lines = []line{
	{"heap retained after a full walk", heapLines},
	{"allocations per page", allocLines},
	{"pages at random cursors", pageLines},
	{"in-memory floor of the one-recipient page", floorLines},
	{"OFFSET baseline", offsetLines},
	{"count", countLines},
	{"page vs raw select + opens", rawPageLines},
	{"abandon and ACK", deleteLines},
	{"cold cache", coldLines},
	{"send", sendLines},
	{"fan-out send", fanoutLines},
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
	b := &bench{ctx: ctx, o: o, dir: dir, rng: rand.New(rand.NewPCG(o.Seed, 0x70656e64)), net: transport.NewNetwork(),
		S: human(o.Small), L: human(o.Large)}
	b.logf = func(format string, args ...any) { fmt.Fprintf(progress, format+"\n", args...) }

	var envs []*env
	defer func() {
		for _, e := range envs {
			if e.s != nil {
				e.s.Close()
			}
		}
	}()
	for _, x := range []struct {
		name string
		n    int
		dst  **env
	}{{"small", o.Small, &b.small}, {"mid", o.Mid, &b.mid}, {"large", o.Large, &b.large}} {
		e, err := b.seed(x.name, x.n)
		if err != nil {
			return 0, 0, err
		}
		envs = append(envs, e)
		*x.dst = e
	}

	b.victims = map[*env]*victimSet{b.small: newVictims(b.rng, b.small.n), b.large: newVictims(b.rng, b.large.n)}
	var rs []result
	for _, l := range lines {
		if !o.selected(l.name) {
			continue
		}
		b.logf("%s", l.name)
		r, err := l.run(b)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", l.name, err)
		}
		rs = append(rs, r...)
	}
	met, total = printTable(out, o, rs, time.Since(start))
	return met, total, nil
}

// seed builds the database name with n pending messages over a skewed
// spread of recipients.
func (b *bench) seed(name string, n int) (*env, error) {
	keys, err := benchseed.NewKeyring()
	if err != nil {
		return nil, err
	}
	cfg := benchseed.Config{N: n, Recipients: min(b.o.Recipients, max(2, n/10)), Skew: b.o.Skew}.Normalized()
	layout := cfg.Layout()
	t0 := time.Now()
	path := filepath.Join(b.dir, name+".db")
	s, err := benchseed.OpenLayout(b.ctx, path, keys, layout)
	if err != nil {
		return nil, fmt.Errorf("seed %s: %w", name, err)
	}
	if len(layout.WithAtLeast(store.MaxPageSize+1)) == 0 {
		s.Close()
		return nil, fmt.Errorf("seed %s: no recipient holds a page of %d and its probe row: use more messages", name, store.MaxPageSize)
	}
	shares := layout.Shares()
	b.logf("seeded %s: %d pending over %d recipients (largest %d, median %d, smallest %d) in %s",
		name, n, layout.Recipients(), shares[0], shares[len(shares)/2], shares[len(shares)-1], time.Since(t0).Round(time.Millisecond))
	e := &env{name: name, n: n, path: path, layout: layout, s: s, keys: keys, net: b.net, pragmas: b.o.pragmas()}
	if err := e.applyPragmas(b.ctx); err != nil {
		s.Close()
		return nil, err
	}
	return e, nil
}

// spreadNote describes the recipients a per-recipient page is drawn from.
func spreadNote(e *env) string {
	el := e.layout.WithAtLeast(store.MaxPageSize + 1)
	lo, hi := e.layout.Share(el[0]), e.layout.Share(el[0])
	for _, r := range el {
		lo, hi = min(lo, e.layout.Share(r)), max(hi, e.layout.Share(r))
	}
	return fmt.Sprintf("%d recipients holding %d-%d", len(el), lo, hi)
}

func pageLines(b *bench) ([]result, error) {
	ctx, o := b.ctx, b.o
	a, c, err := interleave(o.Iters, b.large.pageAt(ctx, b.large.globalCursors(b.rng, o.Iters)), b.small.pageAt(ctx, b.small.globalCursors(b.rng, o.Iters)))
	if err != nil {
		return nil, err
	}
	rs := []result{ratioLE(fmt.Sprintf("page of 100, all recipients: %s / %s pending", b.L, b.S), a, c, 1.3,
		", random cursors over the whole sequence")}
	a, c, err = interleave(o.Iters, b.large.pageAt(ctx, b.large.recipientCursors(b.rng, o.Iters)), b.small.pageAt(ctx, b.small.recipientCursors(b.rng, o.Iters)))
	if err != nil {
		return nil, err
	}
	rs = append(rs, ratioLE(fmt.Sprintf("page of 100, one recipient: %s / %s pending", b.L, b.S), a, c, 1.3,
		fmt.Sprintf(", random recipient and cursor over its whole queue (%s / %s); %s at %s", spreadNote(b.large), spreadNote(b.small), a.spread(), b.L)))
	return rs, nil
}

func offsetLines(b *bench) ([]result, error) {
	// Each round and side draws its own position in the eighth of the
	// table below -offset-at: at one fixed position the keyset page would
	// read the same few pages every round, always cached.
	pos := int(float64(b.o.Large) * b.o.OffsetAt)
	lo := pos - pos/8
	draw := func() int { return lo + b.rng.IntN(pos-lo+1) }
	a, c, err := interleave(b.o.SlowIters, func(int) error { return offsetPage(b.ctx, b.large, draw()) },
		func(int) error { return b.large.page(b.ctx, cursor{after: int64(draw())}) })
	if err != nil {
		return nil, err
	}
	return []result{ratioGE(fmt.Sprintf("OFFSET page / keyset page at position %s", human(pos)), a, c, 50,
		fmt.Sprintf(", both 101 rows read, 100 opened, each at a random position in %d-%d", lo, pos))}, nil
}

func countLines(b *bench) ([]result, error) {
	ctx, o := b.ctx, b.o
	count := func(e *env, recipient *ids.DeviceAddress, want int) func(int) error {
		return func(int) error {
			n, err := e.s.CountPending(ctx, recipient)
			if err == nil && n != int64(want) {
				err = fmt.Errorf("%s: count %d, want %d", e.name, n, want)
			}
			return err
		}
	}
	opens0 := b.large.keys.Opens() + b.small.keys.Opens()
	// The first count after Open runs SELECT count(*); it is measured
	// cold in the cold-cache lines. Warm means after it.
	for _, e := range []*env{b.large, b.small} {
		if err := count(e, nil, e.n)(0); err != nil {
			return nil, err
		}
	}
	a, c, err := interleave(o.Iters, count(b.large, nil, b.large.n), count(b.small, nil, b.small.n))
	if err != nil {
		return nil, err
	}
	rs := []result{ratioLE(fmt.Sprintf("count, all recipients: %s / %s pending (warm)", b.L, b.S), a, c, 2,
		", in-memory count checked against PRAGMA data_version")}

	// One recipient: in each round a recipient of the small database
	// drawn in proportion to its share (the recipient of a random
	// message: busy recipients are counted more often), and the recipient
	// of the large one holding the nearest number of messages, so that
	// the ratio shows the cost does not grow with the whole queue.
	nearest := func(want int) int {
		best := 0
		for r := range b.large.layout.Recipients() {
			if abs(b.large.layout.Share(r)-want) < abs(b.large.layout.Share(best)-want) {
				best = r
			}
		}
		return best
	}
	type pair struct{ small, large int }
	pairs := make([]pair, o.Iters)
	for i := range pairs {
		sr, k := 0, b.rng.IntN(b.small.n)
		for k >= b.small.layout.Share(sr) {
			k -= b.small.layout.Share(sr)
			sr++
		}
		pairs[i] = pair{sr, nearest(b.small.layout.Share(sr))}
	}
	countOne := func(e *env, pick func(pair) int) func(int) error {
		return func(round int) error {
			r := pick(pairs[round])
			a := e.layout.Address(r)
			return count(e, &a, e.layout.Share(r))(round)
		}
	}
	a, c, err = interleave(o.Iters, countOne(b.large, func(p pair) int { return p.large }), countOne(b.small, func(p pair) int { return p.small }))
	if err != nil {
		return nil, err
	}
	ls, ss := 0, 0
	for _, p := range pairs {
		ls, ss = ls+b.large.layout.Share(p.large), ss+b.small.layout.Share(p.small)
	}
	rs = append(rs, ratioLE(fmt.Sprintf("count, one recipient: %s / %s pending", b.L, b.S), a, c, 1.3,
		fmt.Sprintf(", per round a recipient drawn by share and the one of nearest share at %s (%d / %d messages on average), answered from the recipient index",
			b.L, ls/len(pairs), ss/len(pairs))))
	opened := b.large.keys.Opens() + b.small.keys.Opens() - opens0
	rs = append(rs, result{Name: "records opened by count (all + one recipient)", Measured: float64(opened), Target: "0", Pass: opened == 0,
		Detail: fmt.Sprintf("Keyring.Opens() delta over %d counts", 4*o.Iters+2)})
	return rs, nil
}

func abs(x int) int { return max(x, -x) }

func rawPageLines(b *bench) ([]result, error) {
	// Each side draws its own cursors: with one cursor for both, the
	// side going second would read the pages the first just cached.
	cs, raw := b.large.globalCursors(b.rng, b.o.Iters), b.large.globalCursors(b.rng, b.o.Iters)
	a, c, err := interleave(b.o.Iters, b.large.pageAt(b.ctx, cs), func(r int) error {
		return rawPage(b.ctx, b.large, raw[r%len(raw)].after)
	})
	if err != nil {
		return nil, err
	}
	return []result{ratioLE(fmt.Sprintf("page / (raw select 101 rows + 100 Keyring.Open) at %s", b.L), a, c, 1.5, ", random cursors over the whole sequence, drawn apart for each side")}, nil
}

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

// victimSet hands out distinct rows of a database drawn at random over
// the whole table, never twice in one run. It remembers only the rows
// handed out, so that the benchmark's own heap stays small (the heap a
// collection marks is part of what every allocation costs).
type victimSet struct {
	rng  *rand.Rand
	n    int
	used map[int]bool
}

func newVictims(rng *rand.Rand, n int) *victimSet {
	return &victimSet{rng: rng, n: n, used: map[int]bool{}}
}

func (v *victimSet) take() (int, error) {
	if len(v.used) >= v.n/2 {
		return 0, errors.New("out of victims")
	}
	for {
		if i := v.rng.IntN(v.n); !v.used[i] {
			v.used[i] = true
			return i, nil
		}
	}
}

// deleteOp deletes one pending message and reports whether it was pending.
type deleteOp func(ctx context.Context, e *env, r ids.DeviceAddress, id ids.LogicalMessageID) (bool, error)

func deleteLines(b *bench) ([]result, error) {
	iters := min(b.o.DMLIters, (b.o.Small/2-b.o.ColdIters)/3) // three lines here, one cold; at most half the rows
	vs := b.victims
	var rs []result
	for _, op := range []struct {
		name string
		fn   deleteOp
	}{
		{"abandon (client.AbandonPending)", func(ctx context.Context, e *env, r ids.DeviceAddress, id ids.LogicalMessageID) (bool, error) {
			c, err := e.theClient(ctx)
			if err != nil {
				return false, err
			}
			st, err := c.AbandonPending(ctx, r, id)
			return st == client.Abandoned, err
		}},
		{"ACK-delete (store CommitAck)", func(ctx context.Context, e *env, r ids.DeviceAddress, id ids.LogicalMessageID) (bool, error) {
			return e.s.CommitAck(ctx, r, id, store.Inbound{Update: store.PeerState{Session: ackSession}})
		}},
		{"delete (store DeletePending)", func(ctx context.Context, e *env, r ids.DeviceAddress, id ids.LogicalMessageID) (bool, error) {
			return e.s.DeletePending(ctx, r, id)
		}},
	} {
		a, c, err := deleteBench(b.ctx, b.small, b.large, vs, iters, op.fn)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op.name, err)
		}
		rs = append(rs, ratioLE(fmt.Sprintf("%s: %s / %s pending", op.name, b.L, b.S), a, c, 1.3, ", random victims over the whole table, replaced untimed"))
	}
	return rs, nil
}

var ackSession = []byte("benchmark session state: opaque to the store, sealed at rest, about one hundred bytes long.......")

// deleteOnce deletes a random existing message of e with del and puts a
// new message for the same recipient in its place, untimed, so that the
// table keeps its size; it returns the time of the delete.
func deleteOnce(ctx context.Context, e *env, vs *victimSet, del deleteOp) (time.Duration, error) {
	row, err := vs.take()
	if err != nil {
		return 0, err
	}
	rcpt, id := e.layout.Row(row)
	d, err := timed(func() error {
		ok, err := del(ctx, e, rcpt, id)
		if err == nil && !ok {
			err = fmt.Errorf("%s: row %d was not pending", e.name, row)
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	_, err = e.s.InsertPending(ctx, rcpt, benchseed.ReplacementID(), benchseed.Plaintext(row, benchseed.DefaultPlaintextSize))
	return d, err
}

// deleteBench times del on a different random existing message of large
// and of small in each round, alternating which goes first; it returns
// large's timings, then small's.
func deleteBench(ctx context.Context, small, large *env, vs map[*env]*victimSet, iters int, del deleteOp) (sample, sample, error) {
	for _, e := range []*env{small, large} {
		if _, err := e.theClient(ctx); err != nil {
			return nil, nil, err
		}
	}
	side := func(e *env) func(int) (time.Duration, error) {
		return func(int) (time.Duration, error) { return deleteOnce(ctx, e, vs[e], del) }
	}
	return alternate(iters, nil, side(large), side(small))
}

// coldLines time, at each size, the first call after the store was closed,
// its files evicted from the OS page cache and the store opened again
// (untimed): a page of all recipients, a page of one recipient, the count
// (whose first call runs SELECT count(*)) and an abandon, each at a fresh
// random place. They have no target: they report what a user meets
// after an app start on a cold disk cache.
func coldLines(b *bench) ([]result, error) {
	if coldNote != "" {
		return []result{{Name: "cold cache", Info: true, Detail: coldNote}}, nil
	}
	ctx, iters := b.ctx, b.o.ColdIters
	type coldOp struct {
		name string
		fn   func(e *env, round int) error
	}
	cursors := map[*env][2][]cursor{}
	victims := b.victims
	for _, e := range []*env{b.small, b.large} {
		cursors[e] = [2][]cursor{e.globalCursors(b.rng, iters), e.recipientCursors(b.rng, iters)}
		if _, err := e.theClient(ctx); err != nil { // the identity the cold abandons load
			return nil, err
		}
	}
	ops := []coldOp{
		{"page of 100, all recipients", func(e *env, r int) error { return e.page(ctx, cursors[e][0][r]) }},
		{"page of 100, one recipient", func(e *env, r int) error { return e.page(ctx, cursors[e][1][r]) }},
		{"count, all recipients (SELECT count(*))", func(e *env, r int) error {
			n, err := e.s.CountPending(ctx, nil)
			if err == nil && n != int64(e.n) {
				err = fmt.Errorf("%s: count %d, want %d", e.name, n, e.n)
			}
			return err
		}},
		{"abandon", nil},
	}
	abandon := func(ctx context.Context, e *env, r ids.DeviceAddress, id ids.LogicalMessageID) (bool, error) {
		st, err := e.client.AbandonPending(ctx, r, id)
		return st == client.Abandoned, err
	}
	var rs []result
	medians := map[string]time.Duration{}
	for _, op := range ops {
		var cold [2]sample
		for r := range iters {
			for k, e := range []*env{b.large, b.small} {
				if err := e.coldOpen(ctx); err != nil {
					return nil, err
				}
				var d time.Duration
				var err error
				if op.fn == nil {
					// The client loads its identity untimed: the app has
					// started; the abandon is what is timed.
					if e.client, err = client.Open(ctx, client.Config{Store: e.s, Transport: e.net, Directory: e.net}); err != nil {
						return nil, err
					}
					d, err = deleteOnce(ctx, e, victims[e], abandon)
				} else {
					d, err = timed(func() error { return op.fn(e, r) })
				}
				if err != nil {
					return nil, fmt.Errorf("cold %s: %w", op.name, err)
				}
				cold[k] = append(cold[k], d)
			}
		}
		medians[op.name] = cold[0].median()
		rs = append(rs, result{Name: fmt.Sprintf("cold: %s at %s", op.name, b.L), Info: true,
			Measured: cold[0].median().Seconds(), Unit: "s",
			Detail: fmt.Sprintf("%s at %s: %s; %s at %s", b.S, fmtDur(cold[1].median()), cold[1].spread(), cold[0].spread(), b.L)})
	}
	g, p := medians[ops[0].name], medians[ops[1].name]
	rs = append(rs, result{Name: fmt.Sprintf("cold: page one recipient / page all at %s", b.L), Info: true,
		Measured: p.Seconds() / g.Seconds(), Unit: "x", Detail: fmt.Sprintf("%s vs %s", fmtDur(p), fmtDur(g))})
	// Leave the stores warm and open for the lines after.
	for _, e := range []*env{b.large, b.small} {
		if err := e.open(ctx); err != nil {
			return nil, err
		}
	}
	return rs, nil
}

// sendRig is a client over a seeded store and a device (in memory) it
// holds a session with, both ways (benchpeers).
type sendRig struct {
	a     *client.Client
	peers *benchpeers.Peers
	peer  ids.DeviceAddress
	n     int // sends since the mailbox was drained
}

// newSendRig establishes a session between e's client and device 1 of a
// new user.
func newSendRig(ctx context.Context, e *env, user string) (*sendRig, error) {
	a, err := e.theClient(ctx)
	if err != nil {
		return nil, err
	}
	peers, err := benchpeers.Establish(ctx, a, e.net, user, 1)
	if err != nil {
		return nil, err
	}
	return &sendRig{a: a, peers: peers, peer: peers.Addrs[0]}, nil
}

// drain empties the device's mailbox and the network's call log every 50
// sends (untimed), so that the in-process network stays small.
func (r *sendRig) drain(ctx context.Context) error {
	if r.n++; r.n%50 != 0 {
		return nil
	}
	return r.peers.Drain(ctx)
}

var sendPlaintext = benchseed.Plaintext(0, benchseed.DefaultPlaintextSize)

func (r *sendRig) send(ctx context.Context) error {
	_, err := r.a.Send(ctx, r.peer, sendPlaintext)
	return err
}

// sendLines time client.Send at the large and the small size, and against
// a raw insert of the same sealed bytes in its own transaction on the
// large store's connection.
func sendLines(b *bench) ([]result, error) {
	ctx := b.ctx
	rl, err := newSendRig(ctx, b.large, "bench-peer-large")
	if err != nil {
		return nil, err
	}
	rsm, err := newSendRig(ctx, b.small, "bench-peer-small")
	if err != nil {
		return nil, err
	}
	sl, ss, err := interleaveWith(b.o.DMLIters, func(int) error { return errors.Join(rl.drain(ctx), rsm.drain(ctx)) },
		func(int) error { return rl.send(ctx) }, func(int) error { return rsm.send(ctx) })
	if err != nil {
		return nil, err
	}
	rs := []result{ratioLE(fmt.Sprintf("send (client.Send): %s / %s pending", b.L, b.S), sl, ss, 1.3,
		fmt.Sprintf(", %.0f msg/s at %s", 1/sl.median().Seconds(), b.L))}

	sealed, err := benchseed.SealRow(b.large.keys, rl.peer, ids.NewLogicalMessageID(), sendPlaintext)
	if err != nil {
		return nil, err
	}
	sends, raws, err := interleaveWith(b.o.DMLIters, func(int) error { return rl.drain(ctx) },
		func(int) error { return rl.send(ctx) }, func(int) error { return rawInsert(ctx, b.large, rl.peer, sealed) })
	if err != nil {
		return nil, err
	}
	rs = append(rs, ratioGE(fmt.Sprintf("send throughput / raw insert throughput at %s (raw time / send time)", b.L), raws, sends, 0.5,
		" (raw vs send); send = encrypt + seal + one tx (pending row + session) + hand-off"))
	return rs, nil
}

// rawInsert is the floor of a send: BEGIN IMMEDIATE; INSERT (sealed
// bytes); COMMIT on the store's own connection, through the project's one
// transaction helper.
func rawInsert(ctx context.Context, e *env, to ids.DeviceAddress, sealed []byte) error {
	id := ids.NewLogicalMessageID()
	return rawInsertTx(ctx, e.rawDB(), to, id, sealed)
}

// selected reports whether the line named name runs under -only.
func (o options) selected(name string) bool {
	words := pragmaList(o.Only)
	if len(words) == 0 {
		return true
	}
	for _, w := range words {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// rawInsertTx inserts sealed as a pending row for to in its own
// transaction, through the generated query and the one transaction
// helper.
func rawInsertTx(ctx context.Context, conn *sql.DB, to ids.DeviceAddress, id ids.LogicalMessageID, sealed []byte) error {
	return sqltx.Run(ctx, conn, func(tx *sql.Tx) error {
		_, err := db.New(tx).InsertPendingOutbound(ctx, db.InsertPendingOutboundParams{
			RecipientUserID: to.UserID, RecipientDeviceID: to.DeviceID, LogicalID: id[:], Sealed: sealed,
		})
		return err
	})
}

// pragmaList splits a comma-separated flag.
func pragmaList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
