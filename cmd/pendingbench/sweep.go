package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/transport/transporttest"
)

// sweepData is the sweep's data file: every figure a chart shows, and
// where it was measured. The charts are drawn from it alone.
type sweepData struct {
	// Command is the command line that produced the file.
	Command string `json:"command"`
	// Machine describes the machine and the toolchain.
	Machine string `json:"machine"`
	// Driver is the import path of the SQLite driver the figures were
	// taken on.
	Driver string `json:"driver,omitempty"`
	// Date is the day the run started, UTC (YYYY-MM-DD).
	Date string `json:"date"`
	// Load is the load average when the run started and ended: other
	// work on a shared machine moves absolute times.
	Load string `json:"load"`
	// WallSeconds is the whole run, seeding included.
	WallSeconds float64 `json:"wall_seconds"`
	// Settings are the options the figures depend on.
	Settings string `json:"settings"`
	// Pending are the sizes measured, ascending.
	Pending []int    `json:"pending"`
	Series  []series `json:"series"`
}

// series is one measured operation at every size.
type series struct {
	ID     string  `json:"id"`
	Label  string  `json:"label"`
	Unit   string  `json:"unit"` // "µs" or "MiB"
	Points []point `json:"points"`
}

// point is one operation at one size: the median and the 10th and 90th
// percentiles of N measurements.
type point struct {
	Pending int     `json:"pending"`
	N       int     `json:"n"`
	Median  float64 `json:"median"`
	P10     float64 `json:"p10"`
	P90     float64 `json:"p90"`
}

// The series of a sweep, in the order they are measured and stored.
const (
	seriesPageAll    = "page_all"
	seriesPageOne    = "page_one"
	seriesPageOneRaw = "page_one_raw"
	seriesPageOneMem = "page_one_mem"
	seriesOffset     = "offset"
	seriesCountWarm  = "count_warm"
	seriesCountSQL   = "count_sql"
	seriesCountCold  = "count_cold"
	seriesOpenCold   = "open_cold"
	seriesAbandon    = "abandon"
	seriesAckDelete  = "ack_delete"
	seriesSend       = "send"
	seriesHeap       = "heap"
)

// defaultSweepSizes are the sizes of -sweep unless -sizes says otherwise.
const defaultSweepSizes = "1000,10000,100000,300000,1000000"

// sweepSizes parses -sizes: ascending, distinct, each at least 500.
func (o options) sweepSizes() ([]int, error) {
	var out []int
	for _, w := range pragmaList(o.Sizes) {
		n, err := strconv.Atoi(w)
		if err != nil || n < 500 {
			return nil, fmt.Errorf("-sizes: %q is not a number of at least 500", w)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("-sizes: no size")
	}
	if !slices.IsSorted(out) || len(slices.Compact(slices.Clone(out))) != len(out) {
		return nil, errors.New("-sizes: sizes must be ascending and distinct")
	}
	if o.ColdIters > out[0]/8 {
		return nil, fmt.Errorf("need -cold-iters <= smallest size / 8")
	}
	return out, nil
}

// sweeper is one sweep: every size seeded once, each operation timed at
// every size in the same rounds, in an order shuffled every round, so
// that the load of the machine at any moment hits all sizes alike.
type sweeper struct {
	*bench
	envs []*env
	// samples[id][i] are the timings of series id at envs[i].
	samples map[string][]sample
	heap    [][]float64 // MiB retained, per env, per walk
}

// sweep measures the operations of the table at every size of -sizes and
// returns the data file's contents. Progress goes to progress.
func sweep(ctx context.Context, o options, progress io.Writer) (*sweepData, error) {
	sizes, err := o.sweepSizes()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	load0 := loadAverage()
	dir, err := os.MkdirTemp(o.Dir, "pendingbench-sweep-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	sw := &sweeper{bench: &bench{ctx: ctx, o: o, dir: dir, rng: rand.New(rand.NewPCG(o.Seed, 0x73776565)), net: transporttest.NewNetwork(),
		victims: map[*env]*victimSet{}}, samples: map[string][]sample{}}
	sw.logf = func(format string, args ...any) { fmt.Fprintf(progress, format+"\n", args...) }
	defer func() {
		for _, e := range sw.envs {
			if e.s != nil {
				e.s.Close()
			}
		}
	}()
	for _, n := range sizes {
		e, err := sw.seed(human(n), n)
		if err != nil {
			return nil, err
		}
		sw.envs = append(sw.envs, e)
		sw.victims[e] = newVictims(sw.rng, n)
	}
	for _, step := range []struct {
		name string
		run  func() error
	}{
		{"heap retained after a walk", sw.heapWalks},
		{"pages", sw.pages},
		{"in-memory floor", sw.memFloor},
		{"OFFSET", sw.offset},
		{"count", sw.count},
		{"abandon and ACK-delete", sw.deletes},
		{"cold open and count", sw.cold},
		{"send", sw.sends},
	} {
		sw.logf("sweep: %s", step.name)
		if err := step.run(); err != nil {
			return nil, fmt.Errorf("sweep: %s: %w", step.name, err)
		}
	}
	wall := time.Since(start)
	return &sweepData{
		Command: o.Command, Machine: machine(), Driver: sqlitedriver.Package, Date: start.UTC().Format(time.DateOnly),
		Load:        fmt.Sprintf("%s at the start, %s at the end (1, 5, 15 min)", load0, loadAverage()),
		WallSeconds: float64(wall.Round(time.Second) / time.Second),
		Settings: fmt.Sprintf("%s; recipients=%d skew=%g seed=%d iters=%d dml-iters=%d slow-iters=%d cold-iters=%d heap-walks=%d offset-at=%g",
			settingsNote(o), o.Recipients, o.Skew, o.Seed, o.Iters, sw.dmlIters(), o.SlowIters, o.ColdIters, o.HeapWalks, o.OffsetAt),
		Pending: sizes, Series: sw.series(),
	}, nil
}

// settingsNote says which connection settings the figures were taken
// with.
func settingsNote(o options) string {
	if o.Pragmas != "" {
		return "store settings + " + o.Pragmas
	}
	return "store settings as shipped"
}

// labels name the series in the data file and the charts.
var labels = map[string]struct{ label, unit string }{
	seriesPageAll:    {"keyset page of 100, all recipients", "µs"},
	seriesPageOne:    {"keyset page of 100, one recipient", "µs"},
	seriesPageOneRaw: {"floor: same query on the raw connection + 100 opens, one recipient", "µs"},
	seriesPageOneMem: {"floor: page of one recipient, every page in SQLite's cache", "µs"},
	seriesOffset:     {"OFFSET page of 100 at 90% depth", "µs"},
	seriesCountWarm:  {"count, all recipients (warm)", "µs"},
	seriesCountCold:  {"count, first after a cold open", "µs"},
	seriesOpenCold:   {"sqlitestore.Open, files evicted from the OS cache", "µs"},
	seriesCountSQL:   {"SELECT count(*) on the raw connection (warm)", "µs"},
	seriesAbandon:    {"abandon (client.AbandonPending)", "µs"},
	seriesAckDelete:  {"ACK-delete (store CommitAck)", "µs"},
	seriesSend:       {"send (client.Send)", "µs"},
	seriesHeap:       {"heap retained after walking every page and GC", "MiB"},
}

// seriesOrder is the order of the series in the data file.
var seriesOrder = []string{
	seriesPageAll, seriesPageOne, seriesPageOneRaw, seriesPageOneMem, seriesOffset,
	seriesCountWarm, seriesCountCold, seriesCountSQL, seriesOpenCold,
	seriesAbandon, seriesAckDelete, seriesSend, seriesHeap,
}

func (sw *sweeper) series() []series {
	var out []series
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	for _, id := range seriesOrder {
		s := series{ID: id, Label: labels[id].label, Unit: labels[id].unit}
		for i, e := range sw.envs {
			if id == seriesHeap {
				h := sw.heap[i]
				s.Points = append(s.Points, point{Pending: e.n, N: len(h), Median: medianOf(h), P10: quantileOf(h, 0.1), P90: quantileOf(h, 0.9)})
				continue
			}
			if sw.samples[id] == nil {
				continue // not measured on this system (cold lines off Linux)
			}
			t := sw.samples[id][i]
			s.Points = append(s.Points, point{Pending: e.n, N: len(t), Median: us(t.median()), P10: us(t.quantile(0.1)), P90: us(t.quantile(0.9))})
		}
		if len(s.Points) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// measure times each series of names at every size (one side per
// series and env, all in the same rounds) and records the timings.
func (sw *sweeper) measure(iters int, between func(int) error, names []string, side func(name string, e *env) func(int) (time.Duration, error)) error {
	var sides []func(int) (time.Duration, error)
	for _, name := range names {
		for _, e := range sw.envs {
			sides = append(sides, side(name, e))
		}
	}
	got, err := shuffled(iters, sw.rng, between, sides...)
	if err != nil {
		return err
	}
	for k, name := range names {
		sw.samples[name] = got[k*len(sw.envs) : (k+1)*len(sw.envs)]
	}
	return nil
}

func (sw *sweeper) heapWalks() error {
	sw.heap = make([][]float64, len(sw.envs))
	for range sw.o.HeapWalks {
		for i, e := range sw.envs {
			w, err := walkHeap(sw.ctx, e)
			if err != nil {
				return err
			}
			sw.heap[i] = append(sw.heap[i], w.retainedMiB())
		}
	}
	return nil
}

// pages: a page of all recipients, a page of one recipient and the raw
// floor of the latter, each side at cursors drawn for it alone.
func (sw *sweeper) pages() error {
	k := sw.o.Iters
	return sw.measure(k, nil, []string{seriesPageAll, seriesPageOne, seriesPageOneRaw}, func(name string, e *env) func(int) (time.Duration, error) {
		switch name {
		case seriesPageAll:
			return timedAt(e.pageAt(sw.ctx, e.globalCursors(sw.rng, k)))
		case seriesPageOne:
			return timedAt(e.pageAt(sw.ctx, e.recipientCursors(sw.rng, k)))
		}
		cs := e.recipientCursors(sw.rng, k)
		return timedAt(func(r int) error { return rawPage(sw.ctx, e, cs[r]) })
	})
}

// memFloor is the page of one recipient with every page of every size in
// SQLite's cache (see floorLines).
func (sw *sweeper) memFloor() error {
	k := sw.o.Iters
	return inMemory(sw.ctx, sw.envs, func() error {
		return sw.measure(k, nil, []string{seriesPageOneMem}, func(_ string, e *env) func(int) (time.Duration, error) {
			return timedAt(e.pageAt(sw.ctx, e.recipientCursors(sw.rng, k)))
		})
	})
}

// offset is the OFFSET page at a random position of offsetRange.
func (sw *sweeper) offset() error {
	return sw.measure(sw.o.SlowIters, nil, []string{seriesOffset}, func(_ string, e *env) func(int) (time.Duration, error) {
		lo, pos := offsetRange(e.n, sw.o.OffsetAt)
		return timedAt(func(int) error { return offsetPage(sw.ctx, e, lo+sw.rng.IntN(pos-lo+1)) })
	})
}

// count: the store's count of all recipients after its first call, and
// SELECT count(*) through the generated query on the raw connection.
func (sw *sweeper) count() error {
	for _, e := range sw.envs {
		if err := countIs(sw.ctx, e, nil, e.n); err != nil {
			return err
		}
	}
	// Apart: a call of a few microseconds timed right after a scan of
	// milliseconds would measure what the scan left in the CPU caches.
	err := sw.measure(sw.o.Iters, nil, []string{seriesCountWarm}, func(_ string, e *env) func(int) (time.Duration, error) {
		return timedAt(func(int) error { return countIs(sw.ctx, e, nil, e.n) })
	})
	if err != nil {
		return err
	}
	return sw.measure(sw.o.Iters, nil, []string{seriesCountSQL}, func(_ string, e *env) func(int) (time.Duration, error) {
		return timedAt(func(int) error {
			n, err := db.New(e.rawDB()).CountPendingOutbound(sw.ctx)
			if err == nil && n != int64(e.n) {
				err = fmt.Errorf("%s: SELECT count(*) %d, want %d", e.name, n, e.n)
			}
			return err
		})
	})
}

// dmlIters is the rounds of each of the two deleting series: at most
// -dml-iters, and together at most half the smallest table (a victim is
// never deleted twice).
func (sw *sweeper) dmlIters() int { return min(sw.o.DMLIters, sw.envs[0].n/4) }

// deletes: abandon and ACK-delete of random victims over the whole
// table, each replaced untimed (deleteOnce).
func (sw *sweeper) deletes() error {
	for _, e := range sw.envs {
		if _, err := e.theClient(sw.ctx); err != nil {
			return err
		}
	}
	return sw.measure(sw.dmlIters(), nil, []string{seriesAbandon, seriesAckDelete}, func(name string, e *env) func(int) (time.Duration, error) {
		del := ackDelete
		if name == seriesAbandon {
			del = abandonPending
		}
		return func(int) (time.Duration, error) { return deleteOnce(sw.ctx, e, sw.victims[e], del) }
	})
}

// cold times, at every size, sqlitestore.Open after the store was closed
// and its files evicted from the OS page cache (what an app start waits
// for before its first call), and, after another such open (untimed),
// the first count: SELECT count(*) over whatever the open left cold.
func (sw *sweeper) cold() error {
	if coldNote != "" {
		sw.logf("sweep: %s", coldNote)
		return nil
	}
	err := sw.measure(sw.o.ColdIters, nil, []string{seriesOpenCold}, func(_ string, e *env) func(int) (time.Duration, error) {
		return func(int) (time.Duration, error) {
			if err := e.closeEvicted(); err != nil {
				return 0, err
			}
			return timed(func() error { return e.open(sw.ctx) })
		}
	})
	if err != nil {
		return err
	}
	err = sw.measure(sw.o.ColdIters, nil, []string{seriesCountCold}, func(_ string, e *env) func(int) (time.Duration, error) {
		return func(int) (time.Duration, error) {
			if err := e.coldOpen(sw.ctx); err != nil {
				return 0, err
			}
			return timed(func() error { return countIs(sw.ctx, e, nil, e.n) })
		}
	})
	if err != nil {
		return err
	}
	for _, e := range sw.envs { // warm and open again for the sends
		if err := e.open(sw.ctx); err != nil {
			return err
		}
	}
	return nil
}

// sends: client.Client.Send of 200 bytes to an established session, at
// every size.
func (sw *sweeper) sends() error {
	rigs := map[*env]*sendRig{}
	for _, e := range sw.envs {
		r, err := newSendRig(sw.ctx, e, "bench-peer-"+e.name)
		if err != nil {
			return err
		}
		rigs[e] = r
	}
	drain := func(int) error {
		var errs []error
		for _, r := range rigs {
			errs = append(errs, r.drain(sw.ctx))
		}
		return errors.Join(errs...)
	}
	return sw.measure(sw.o.DMLIters, drain, []string{seriesSend}, func(_ string, e *env) func(int) (time.Duration, error) {
		return timedAt(func(int) error { return rigs[e].send(sw.ctx) })
	})
}

// printSweep writes the sweep's medians as a table, one row per series.
func printSweep(w io.Writer, d *sweepData) {
	fmt.Fprintf(w, "pendingbench -sweep: %s, %s; %s\n", d.Machine, d.Date, d.Settings)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "median (p10-p90)\t")
	for _, n := range d.Pending {
		fmt.Fprintf(tw, "%s\t", human(n))
	}
	fmt.Fprintln(tw)
	for _, s := range d.Series {
		fmt.Fprintf(tw, "%s\t", s.Label)
		for _, p := range s.Points {
			fmt.Fprintf(tw, "%s (%s-%s)\t", fmtValue(p.Median, s.Unit), fmtValue(p.P10, s.Unit), fmtValue(p.P90, s.Unit))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintf(w, "load average: %s\nwall time: %s\n", d.Load, time.Duration(d.WallSeconds)*time.Second)
}

// fmtValue formats a figure of the data file in its unit.
func fmtValue(v float64, unit string) string {
	if unit == "MiB" {
		return fmt.Sprintf("%.2f MiB", v)
	}
	return fmtDur(time.Duration(v * 1e3))
}

// writeSweep writes d as indented JSON to path.
func writeSweep(path string, d *sweepData) error {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// readSweep reads a data file written by writeSweep.
func readSweep(path string) (*sweepData, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d sweepData
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &d, nil
}

// machine describes this machine: CPU model, cores, memory, system and
// toolchain (what /proc tells, where there is one).
func machine() string {
	cpu, mem := "", ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":")) + ", "
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				if kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64); err == nil {
					mem = fmt.Sprintf(", %d GiB RAM", (kib+1<<19)>>20)
				}
			}
		}
	}
	return fmt.Sprintf("%s%d cores (GOMAXPROCS=%d)%s, %s/%s, %s", cpu, runtime.NumCPU(), runtime.GOMAXPROCS(0), mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// loadAverage is the system's load average (1, 5 and 15 minutes), or
// "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
