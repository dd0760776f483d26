// Command pendingbench measures that the pending-outbound operations cost
// O(page), not O(pending), as a user meets them: it seeds SQLite
// databases (in a temporary directory, removed at exit) with a small and
// a large number of pending messages over a skewed spread of recipients
// (a few hold most messages, most hold a handful), draws random cursors
// over the whole queue (for one recipient: over its whole share), times
// each operation against its other side in one run, interleaving the two
// sides and taking medians, and prints one table of ratios against their
// targets. Cold-cache lines (Linux) time the first call after the store
// was closed, its files evicted from the OS page cache and reopened; they
// are reported, without a target. Absolute times on a shared machine are
// noise; the ratios taken in one run are the result.
//
// Build it from the repository root, and run it there (the data file's
// default path is relative to the working directory):
//
//	go -C cmd build -o ../bin/ ./pendingbench
//	bin/pendingbench                  # 1,000 / 100,000 / 1,000,000 pending
//	bin/pendingbench -large 200000 -iters 101
//	bin/pendingbench -sweep           # 1k to 1M: docs/bench/sweep.json and charts
//	bin/pendingbench -charts          # redraw the charts from docs/bench/sweep.json
//	CGO_ENABLED=0 go -C cmd build -o ../bin/pendingbench-purego ./pendingbench
//	bin/pendingbench -drivers bin/pendingbench-purego   # modernc.org/sqlite against mattn/go-sqlite3
//
// Built with CGO_ENABLED=0, the command measures the library on the
// pure-Go SQLite driver (modernc.org/sqlite). -drivers BIN times the
// sweep's operations at -large on this build's driver (mattn/go-sqlite3),
// then runs BIN, such a pure-Go build, with -sweep at -large, and prints
// the pure-Go medians of a page, a page of one recipient, the count,
// abandon, ACK-delete and send against mattn's, as ratios with a target
// each.
//
// -sweep seeds each size of -sizes once and times the table's operations
// at every size in the same rounds (absolute medians and the 10th and
// 90th percentiles, not ratios), writes them to the data file (-data)
// and draws the charts beside it. -charts draws them from the data file
// alone, so a chart never shows a figure no run produced.
//
// The exit status is 0 whatever the figures (non-zero only if the
// benchmark itself fails); the last line is "N of M targets met", after
// the failing lines, if any, are listed.
//
// The OFFSET page is the baseline the keyset page is compared with: its
// SQL lives only here, never in queries/.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/securemsg/storage/internal/testkit/benchseed"
)

func main() {
	var o options
	flag.IntVar(&o.Small, "small", 1000, "pending messages in the small database")
	flag.IntVar(&o.Mid, "mid", 100_000, "pending messages in the middle database (heap walk only)")
	flag.IntVar(&o.Large, "large", 1_000_000, "pending messages in the large database")
	flag.IntVar(&o.Recipients, "recipients", 1000, "recipients the messages are spread over")
	flag.IntVar(&o.ManyRecipients, "many-recipients", 100_000, "recipients of the second -large database the recipient listing is measured on")
	flag.IntVar(&o.Iters, "iters", 301, "repetitions per side of each page measurement")
	flag.IntVar(&o.DMLIters, "dml-iters", 301, "repetitions per side of each delete and send measurement")
	flag.IntVar(&o.SlowIters, "slow-iters", 21, "repetitions per side of the OFFSET measurement")
	flag.IntVar(&o.ColdIters, "cold-iters", 11, "cold-cache repetitions of each operation at each size")
	flag.Float64Var(&o.Skew, "skew", benchseed.DefaultSkew, "recipient r holds a share proportional to (r+1)^-skew")
	flag.Uint64Var(&o.Seed, "seed", 1, "seed of the random cursors and victims")
	flag.StringVar(&o.Pragmas, "pragmas", "", "comma-separated PRAGMAs applied to every store connection after open, to measure settings other than the store's (e.g. cache_size=-65536,mmap_size=1073741824)")
	flag.Float64Var(&o.OffsetAt, "offset-at", 0.9, "OFFSET pages are drawn from the eighth of the table (-large; under -sweep each size) below this fraction of it")
	flag.StringVar(&o.Only, "only", "", "comma-separated words: run only the measurements whose name contains one (e.g. pages,cold); the summary then covers those")
	flag.StringVar(&o.Dir, "dir", "", "parent of the temporary directory (default: the system temp dir)")
	flag.BoolVar(&o.Quiet, "q", false, "no progress on stderr")
	flag.BoolVar(&o.Sweep, "sweep", false, "measure every size of -sizes and write -data and the charts beside it, instead of the table")
	flag.BoolVar(&o.Charts, "charts", false, "only draw the charts from -data (no measurement)")
	flag.StringVar(&o.Sizes, "sizes", defaultSweepSizes, "comma-separated pending counts of -sweep, ascending")
	flag.StringVar(&o.Data, "data", "docs/bench/sweep.json", "the data file -sweep writes and -charts reads; the charts go beside it")
	flag.IntVar(&o.HeapWalks, "heap-walks", 3, "walks of every page per size for the heap line of -sweep")
	flag.StringVar(&o.Drivers, "drivers", "", "a build of pendingbench with CGO_ENABLED=0: measure the sweep's operations at -large on this build's driver, then in that build on the pure-Go one, and print the ratios")
	flag.Parse()
	o.Command = commandLine()
	progress := io.Writer(os.Stderr)
	if o.Quiet {
		progress = io.Discard
	}
	if err := runMode(context.Background(), o, os.Stdout, progress); err != nil {
		fmt.Fprintln(os.Stderr, "pendingbench:", err)
		os.Exit(1)
	}
}

// runMode runs what the flags ask for: the table, the sweep, or the
// charts alone.
func runMode(ctx context.Context, o options, out, progress io.Writer) error {
	switch {
	case o.Drivers != "":
		_, _, err := drivers(ctx, o, o.Drivers, out, progress)
		return err
	case o.Charts:
		d, err := readSweep(o.Data)
		if err != nil {
			return err
		}
		return writeCharts(filepath.Dir(o.Data), d)
	case o.Sweep:
		if err := o.validate(); err != nil {
			return err
		}
		d, err := sweep(ctx, o, progress)
		if err != nil {
			return err
		}
		printSweep(out, d)
		if err := writeSweep(o.Data, d); err != nil {
			return err
		}
		if err := writeCharts(filepath.Dir(o.Data), d); err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %s and %d charts beside it\n", o.Data, len(charts))
		return nil
	}
	_, _, err := run(ctx, o, out, progress)
	return err
}

// commandLine is the command as run, for the data file: the flags that
// were set, in flag order, without those that change no figure.
func commandLine() string {
	parts := []string{"bin/pendingbench"}
	for _, mode := range []string{"sweep", "charts"} {
		if f := flag.Lookup(mode); f != nil && f.Value.String() == "true" {
			parts = append(parts, "-"+mode)
		}
	}
	flag.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "q", "dir", "data", "sweep", "charts":
			return
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() && f.Value.String() == "true" {
			parts = append(parts, "-"+f.Name)
			return
		}
		parts = append(parts, "-"+f.Name, f.Value.String())
	})
	return strings.Join(parts, " ")
}

// options are the command's flags.
type options struct {
	Small, Mid, Large int
	Recipients        int
	ManyRecipients    int
	Iters             int
	DMLIters          int
	SlowIters         int
	ColdIters         int
	Skew              float64
	Seed              uint64
	Pragmas           string
	Only              string
	OffsetAt          float64
	Dir               string
	Quiet             bool
	// Sweep, Charts, Sizes, Data and HeapWalks are the sweep's flags;
	// Command is the command line, recorded in its data file.
	Sweep, Charts bool
	Sizes, Data   string
	HeapWalks     int
	// Drivers is -drivers: the pure-Go build to compare with.
	Drivers string
	Command string
}

func (o options) validate() error {
	switch {
	case o.Small < 500 || o.Mid < o.Small || o.Large < o.Small:
		return fmt.Errorf("need 500 <= -small <= -mid, -large (got %d, %d, %d)", o.Small, o.Mid, o.Large)
	case o.ColdIters > o.Small/8:
		return fmt.Errorf("need -cold-iters <= -small/8")
	case o.Recipients < 2:
		return fmt.Errorf("need -recipients >= 2")
	case o.ManyRecipients < 2 && !o.Sweep:
		return fmt.Errorf("need -many-recipients >= 2")
	case o.Iters < 1 || o.DMLIters < 1 || o.SlowIters < 1 || o.ColdIters < 1 || (o.Sweep && o.HeapWalks < 1):
		return fmt.Errorf("need positive iteration counts")
	case o.OffsetAt <= 0 || o.OffsetAt >= 1:
		return fmt.Errorf("need 0 < -offset-at < 1")
	case o.Skew <= 0:
		return fmt.Errorf("need -skew > 0")
	}
	return nil
}

func (o options) pragmas() []string { return pragmaList(o.Pragmas) }

// result is one line of the table.
type result struct {
	Name     string
	Measured float64
	Unit     string // "x" for ratios, "MiB", "s" for times, "" for counts
	Target   string
	Pass     bool
	// Info marks a line reported without a target (the cold-cache
	// lines): it is not counted in "N of M targets met".
	Info   bool
	Detail string
}

func (r result) measured() string {
	switch r.Unit {
	case "x":
		return fmt.Sprintf("%.2fx", r.Measured)
	case "MiB":
		return fmt.Sprintf("%.2f MiB", r.Measured)
	case "s":
		return fmtDur(time.Duration(r.Measured * float64(time.Second)))
	case "":
		if r.Info {
			return "-"
		}
	}
	return fmt.Sprintf("%g", r.Measured)
}

func ratioLE(name string, a, b sample, limit float64, detail string) result {
	r := a.median().Seconds() / b.median().Seconds()
	return result{Name: name, Measured: r, Unit: "x", Target: fmt.Sprintf("<= %.1f", limit), Pass: r <= limit,
		Detail: fmt.Sprintf("%s vs %s%s", fmtDur(a.median()), fmtDur(b.median()), detail)}
}

func ratioGE(name string, a, b sample, limit float64, detail string) result {
	r := a.median().Seconds() / b.median().Seconds()
	return result{Name: name, Measured: r, Unit: "x", Target: fmt.Sprintf(">= %g", limit), Pass: r >= limit,
		Detail: fmt.Sprintf("%s vs %s%s", fmtDur(a.median()), fmtDur(b.median()), detail)}
}

func printTable(w io.Writer, o options, rs []result, elapsed time.Duration) (met, total int) {
	settings := "store settings"
	if o.Pragmas != "" {
		settings += " + " + o.Pragmas
	}
	if o.Only != "" {
		settings += ", only " + o.Only
	}
	fmt.Fprintf(w, "pendingbench: %s, %s/%s, GOMAXPROCS=%d, small=%d mid=%d large=%d recipients=%d skew=%g iters=%d/%d/%d/%d, %s, %s\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0),
		o.Small, o.Mid, o.Large, o.Recipients, o.Skew, o.Iters, o.DMLIters, o.SlowIters, o.ColdIters, settings, elapsed.Round(time.Second))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "line\tmeasured\ttarget\tresult\tmedians / detail")
	fmt.Fprintln(tw, "----\t--------\t------\t------\t----------------")
	var failed []string
	for _, r := range rs {
		res, target := "FAIL", r.Target
		switch {
		case r.Info:
			res, target = "info", "-"
		case r.Pass:
			res = "pass"
			met++
		default:
			failed = append(failed, r.Name)
		}
		if !r.Info {
			total++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.measured(), target, res, r.Detail)
	}
	tw.Flush()
	for _, f := range failed {
		fmt.Fprintf(w, "FAIL: %s\n", f)
	}
	fmt.Fprintf(w, "%d of %d targets met\n", met, total)
	return met, total
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
	}
}

func human(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return strings.TrimSpace(fmt.Sprint(n))
}
