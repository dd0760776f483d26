package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"text/tabwriter"

	"github.com/securemsg/storage/internal/sqlitedriver"
)

// driverLines are the operations -drivers compares, with the most the
// pure-Go driver's median may cost against mattn/go-sqlite3's at -large
// (set from measured runs, BENCHMARKS.md "The two SQLite drivers").
var driverLines = []struct {
	id     string
	target float64
}{
	{seriesPageAll, 1.5},
	{seriesPageOne, 1.5},
	{seriesCountWarm, 3},
	{seriesAbandon, 2},
	{seriesAckDelete, 2},
	{seriesSend, 2},
}

// drivers measures the sweep's operations at -large twice: in this
// process, on the driver of this build (mattn/go-sqlite3), and in bin, a
// build of this command with CGO_ENABLED=0 (modernc.org/sqlite), run as
// a subprocess after it; and prints the pure-Go medians against mattn's,
// as ratios against driverLines' targets. It returns how many targets
// were met, of how many.
func drivers(ctx context.Context, o options, bin string, out, progress io.Writer) (met, total int, err error) {
	if sqlitedriver.Package != "github.com/mattn/go-sqlite3" {
		return 0, 0, fmt.Errorf("-drivers: this build links %s: run -drivers from a build with cgo (mattn/go-sqlite3)", sqlitedriver.Package)
	}
	so := o
	so.Sweep, so.Sizes = true, strconv.Itoa(o.Large)
	fmt.Fprintf(progress, "drivers: %s at %s\n", sqlitedriver.Package, so.Sizes)
	ours, err := sweep(ctx, so, progress)
	if err != nil {
		return 0, 0, err
	}
	dir, err := os.MkdirTemp(o.Dir, "pendingbench-drivers-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	data := filepath.Join(dir, "purego.json")
	args := []string{"-sweep", "-sizes", so.Sizes, "-data", data,
		"-recipients", strconv.Itoa(o.Recipients), "-iters", strconv.Itoa(o.Iters), "-dml-iters", strconv.Itoa(o.DMLIters),
		"-slow-iters", strconv.Itoa(o.SlowIters), "-cold-iters", strconv.Itoa(o.ColdIters), "-heap-walks", strconv.Itoa(o.HeapWalks),
		"-skew", strconv.FormatFloat(o.Skew, 'g', -1, 64), "-seed", strconv.FormatUint(o.Seed, 10),
		"-offset-at", strconv.FormatFloat(o.OffsetAt, 'g', -1, 64), "-pragmas", o.Pragmas}
	if o.Dir != "" {
		args = append(args, "-dir", o.Dir)
	}
	fmt.Fprintf(progress, "drivers: %s %v\n", bin, args)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = progress, progress
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("-drivers: the pure-Go build: %w", err)
	}
	theirs, err := readSweep(data)
	if err != nil {
		return 0, 0, err
	}
	if theirs.Driver == sqlitedriver.Package {
		return 0, 0, fmt.Errorf("-drivers: %s links %s too: build it with CGO_ENABLED=0", bin, theirs.Driver)
	}
	fmt.Fprintf(out, "pendingbench -drivers: %s against %s at %s pending, %s; %s\n", theirs.Driver, ours.Driver, human(o.Large), ours.Machine, ours.Settings)
	fmt.Fprintf(out, "load: %s (%s), then %s (%s)\n", ours.Load, ours.Driver, theirs.Load, theirs.Driver)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "operation\tmattn µs\tpure Go µs\tratio\ttarget\t\t\n")
	for _, l := range driverLines {
		a, b := median(ours, l.id), median(theirs, l.id)
		if a <= 0 || b <= 0 {
			return 0, 0, fmt.Errorf("-drivers: %s not measured", l.id)
		}
		r := b / a
		total++
		verdict := "FAIL"
		if r <= l.target {
			met++
			verdict = "ok"
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.2fx\t<= %gx\t%s\t\n", labels[l.id].label, a, b, r, l.target, verdict)
	}
	if err := tw.Flush(); err != nil {
		return 0, 0, err
	}
	fmt.Fprintf(out, "%d of %d targets met\n", met, total)
	return met, total, nil
}

// median is the median of series id at the only size of d, or 0.
func median(d *sweepData, id string) float64 {
	for _, s := range d.Series {
		if s.ID == id && len(s.Points) == 1 {
			return s.Points[0].Median
		}
	}
	return 0
}
