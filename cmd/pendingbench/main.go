// Command pendingbench measures that the pending-outbound operations
// (page, count, abandon) cost O(page), not O(pending): it seeds SQLite databases (in
// a temporary directory, removed at exit) with a small and a large number
// of pending messages, times each operation against its other side in one
// run, interleaving the two sides and taking medians, and prints one table
// of ratios against their targets. Absolute times on a shared machine are
// noise; the ratios taken in one run are the result.
//
//	go run ./cmd/pendingbench                  # 1,000 / 100,000 / 1,000,000 pending
//	go run ./cmd/pendingbench -large 200000 -iters 101
//
// The exit status is 0 whatever the figures (non-zero only if the
// benchmark itself fails); the last line is "N of M targets met".
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
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

func main() {
	var o options
	flag.IntVar(&o.Small, "small", 1000, "pending messages in the small database")
	flag.IntVar(&o.Mid, "mid", 100_000, "pending messages in the middle database (heap walk only)")
	flag.IntVar(&o.Large, "large", 1_000_000, "pending messages in the large database")
	flag.IntVar(&o.Recipients, "recipients", 1000, "recipients the messages are spread over")
	flag.IntVar(&o.Iters, "iters", 301, "repetitions per side of each page measurement")
	flag.IntVar(&o.DMLIters, "dml-iters", 301, "repetitions per side of each delete and send measurement")
	flag.IntVar(&o.SlowIters, "slow-iters", 21, "repetitions per side of the OFFSET and count measurements")
	flag.Float64Var(&o.OffsetAt, "offset-at", 0.9, "position of the OFFSET page, as a fraction of -large")
	flag.StringVar(&o.Dir, "dir", "", "parent of the temporary directory (default: the system temp dir)")
	flag.BoolVar(&o.Quiet, "q", false, "no progress on stderr")
	flag.Parse()
	progress := io.Writer(os.Stderr)
	if o.Quiet {
		progress = io.Discard
	}
	if _, _, err := run(context.Background(), o, os.Stdout, progress); err != nil {
		fmt.Fprintln(os.Stderr, "pendingbench:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	Small, Mid, Large int
	Recipients        int
	Iters             int
	DMLIters          int
	SlowIters         int
	OffsetAt          float64
	Dir               string
	Quiet             bool
}

func (o options) validate() error {
	switch {
	case o.Small < 200 || o.Mid < o.Small || o.Large < o.Small:
		return fmt.Errorf("need 200 <= -small <= -mid, -large (got %d, %d, %d)", o.Small, o.Mid, o.Large)
	case o.Recipients < 2:
		return fmt.Errorf("need -recipients >= 2")
	case o.Iters < 1 || o.DMLIters < 1 || o.SlowIters < 1:
		return fmt.Errorf("need positive iteration counts")
	case o.OffsetAt <= 0 || o.OffsetAt >= 1:
		return fmt.Errorf("need 0 < -offset-at < 1")
	}
	return nil
}

// result is one line of the table.
type result struct {
	Name     string
	Measured float64
	Unit     string // "x" for ratios, "MiB", "" for counts
	Target   string
	Pass     bool
	Detail   string
}

func (r result) measured() string {
	switch r.Unit {
	case "x":
		return fmt.Sprintf("%.2fx", r.Measured)
	case "MiB":
		return fmt.Sprintf("%.2f MiB", r.Measured)
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

func printTable(w io.Writer, o options, rs []result, elapsed time.Duration) (met int) {
	fmt.Fprintf(w, "pendingbench: %s, %s/%s, GOMAXPROCS=%d, small=%d mid=%d large=%d recipients=%d iters=%d/%d/%d, %s\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0),
		o.Small, o.Mid, o.Large, o.Recipients, o.Iters, o.DMLIters, o.SlowIters, elapsed.Round(time.Second))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "line\tmeasured\ttarget\tresult\tmedians / detail")
	fmt.Fprintln(tw, "----\t--------\t------\t------\t----------------")
	for _, r := range rs {
		res := "FAIL"
		if r.Pass {
			res = "pass"
			met++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.measured(), r.Target, res, r.Detail)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d of %d targets met\n", met, len(rs))
	return met
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
