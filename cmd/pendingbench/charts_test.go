package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// committedData is the data file the committed charts were drawn from.
const committedData = "../../docs/bench/sweep.json"

// TestCommittedChartsAreDrawnFromCommittedData redraws every committed
// chart from the committed data file and requires the same bytes: a
// chart shows only figures a run wrote to the data file. After a new
// sweep, or a change to the drawing code, run
// `bin/pendingbench -charts` and commit the SVGs.
func TestCommittedChartsAreDrawnFromCommittedData(t *testing.T) {
	d, err := readSweep(committedData)
	require.NoError(t, err)
	requireComplete(t, d)
	for _, c := range charts {
		t.Run(c.file, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join(filepath.Dir(committedData), c.file))
			require.NoError(t, err)
			got, err := drawChart(d, c)
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got), "%s differs from what the committed data draws: run bin/pendingbench -charts", c.file)
		})
	}
}

// requireComplete checks that d holds every series at every size, with
// p10 <= median <= p90 from at least one measurement, and says where it
// was made.
func requireComplete(t *testing.T, d *sweepData) {
	t.Helper()
	require.NotEmpty(t, d.Command)
	require.NotEmpty(t, d.Machine)
	require.Regexp(t, `^\d{4}-\d{2}-\d{2}$`, d.Date)
	require.NotEmpty(t, d.Pending)
	var ids []string
	for _, s := range d.Series {
		ids = append(ids, s.ID)
		require.Len(t, s.Points, len(d.Pending), s.ID)
		for i, p := range s.Points {
			require.Equal(t, d.Pending[i], p.Pending, s.ID)
			require.Positive(t, p.N, s.ID)
			require.LessOrEqual(t, p.P10, p.Median, "%s at %d", s.ID, p.Pending)
			require.LessOrEqual(t, p.Median, p.P90, "%s at %d", s.ID, p.Pending)
		}
	}
	want := seriesOrder
	if coldNote != "" { // made where cold lines are measured, read anywhere
		want = ids
	}
	require.Equal(t, want, ids)
}

// TestChartsFollowTheData: the same data draws the same bytes, and a
// changed figure draws a different chart.
func TestChartsFollowTheData(t *testing.T) {
	d, err := readSweep(committedData)
	require.NoError(t, err)
	for _, c := range charts {
		a, err := drawChart(d, c)
		require.NoError(t, err)
		b, err := drawChart(d, c)
		require.NoError(t, err)
		require.Equal(t, a, b, c.file)

		changed, err := readSweep(committedData)
		require.NoError(t, err)
		for i := range changed.Series {
			if changed.Series[i].ID == c.series[0] {
				changed.Series[i].Points[0].Median *= 1.5
				changed.Series[i].Points[0].P90 *= 1.5
			}
		}
		x, err := drawChart(changed, c)
		require.NoError(t, err)
		require.NotEqual(t, a, x, "%s: a changed median must change the chart", c.file)
	}
}

// TestSweepTiny runs the sweep on tiny databases: every series is
// measured at every size, the data file reads back as written, and
// -charts draws from it alone what -sweep drew. The figures mean nothing
// at this size.
func TestSweepTiny(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "out", "sweep.json")
	o := options{Small: 600, Mid: 600, Large: 600, Recipients: 50, Skew: 1.5, Seed: 1, Iters: 3, DMLIters: 4, SlowIters: 2, ColdIters: 2,
		OffsetAt: 0.9, Dir: dir, Sweep: true, Sizes: "600,900", Data: data, HeapWalks: 2, Command: "bin/pendingbench -sweep -sizes 600,900"}
	var out bytes.Buffer
	require.NoError(t, runMode(context.Background(), o, &out, io.Discard))
	require.Contains(t, out.String(), "wall time: ")
	d, err := readSweep(data)
	require.NoError(t, err)
	requireComplete(t, d)
	require.Equal(t, []int{600, 900}, d.Pending)
	require.Equal(t, o.Command, d.Command)
	for _, s := range d.Series {
		require.Contains(t, out.String(), s.Label, "the table shows every series")
	}

	drawn := map[string][]byte{}
	for _, c := range charts {
		b, err := os.ReadFile(filepath.Join(dir, "out", c.file))
		require.NoError(t, err)
		drawn[c.file] = b
		require.NoError(t, os.Remove(filepath.Join(dir, "out", c.file)))
	}
	o.Sweep, o.Charts = false, true
	require.NoError(t, runMode(context.Background(), o, io.Discard, io.Discard))
	for _, c := range charts {
		b, err := os.ReadFile(filepath.Join(dir, "out", c.file))
		require.NoError(t, err)
		require.Equal(t, drawn[c.file], b, c.file)
		require.Contains(t, string(b), "bin/pendingbench -sweep -sizes 600,900", "%s names the command", c.file)
		require.Contains(t, string(b), d.Date, "%s names the date", c.file)
	}
}

func TestSweepSizes(t *testing.T) {
	for _, tc := range []struct {
		sizes string
		want  []int
	}{
		{defaultSweepSizes, []int{1000, 10_000, 100_000, 300_000, 1_000_000}},
		{"600, 900", []int{600, 900}},
		{"", nil},
		{"900,600", nil},
		{"600,600", nil},
		{"100", nil},
		{"1k", nil},
	} {
		t.Run(tc.sizes, func(t *testing.T) {
			got, err := options{Sizes: tc.sizes, ColdIters: 1}.sweepSizes()
			if tc.want == nil {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
