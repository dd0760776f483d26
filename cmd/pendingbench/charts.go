package main

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// chart is one SVG drawn from the sweep's data file.
type chart struct {
	file   string
	title  string
	series []string
	// logY draws latencies on a log scale (series that differ by orders
	// of magnitude); otherwise the y axis starts at zero.
	logY bool
	// limit, if not zero, is drawn as a dashed horizontal line.
	limit      float64
	limitLabel string
}

// charts are the sweep's charts, drawn by -sweep and -charts.
var charts = []chart{
	{file: "pages.svg", title: "A keyset page of 100 against OFFSET; one recipient's page grows as its floors do",
		series: []string{seriesOffset, seriesPageOne, seriesPageOneRaw, seriesPageOneMem, seriesPageAll}, logY: true},
	{file: "count.svg", title: "Count: kept in memory, against SELECT count(*); and a cold Open",
		series: []string{seriesCountCold, seriesCountSQL, seriesCountWarm, seriesOpenCold}, logY: true},
	{file: "writes.svg", title: "Abandon, ACK-delete and send at any queue size",
		series: []string{seriesAbandon, seriesAckDelete, seriesSend}},
	{file: "heap.svg", title: "Heap retained after walking every page of the queue",
		series: []string{seriesHeap}, limit: 1, limitLabel: "target: at most 1 MiB"},
}

// Chart geometry and style: fixed, so that the same data draws the same
// bytes. The fonts are the plotting library's own (Liberation, compiled
// in), referenced by name and not embedded.
const (
	chartWidth  = 7 * vg.Inch
	chartHeight = 3.6 * vg.Inch // the plot; legend and caption below add to it
	captionSize = 7
	captionLead = 1.35
)

var (
	sansFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	palette  = []color.NRGBA{
		{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // red
		{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue
		{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // green
		{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // purple
		{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // orange
	}
)

// writeCharts draws every chart of d into dir.
func writeCharts(dir string, d *sweepData) error {
	for _, c := range charts {
		b, err := drawChart(d, c)
		if err != nil {
			return fmt.Errorf("%s: %w", c.file, err)
		}
		if err := os.WriteFile(filepath.Join(dir, c.file), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// drawChart draws chart c from d alone: the same d gives the same bytes.
func drawChart(d *sweepData, c chart) ([]byte, error) {
	p := plot.New()
	p.Title.Text = c.title
	p.Title.TextStyle.Font = font.From(sansFont, 11)
	p.Title.Padding = vg.Points(8)
	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		ax.Label.TextStyle.Font = font.From(sansFont, 9)
		ax.Tick.Label.Font = font.From(sansFont, 8)
	}
	// The legend goes below the plot, above the caption: inside, it would
	// hide the lines.
	leg := plot.NewLegend()
	leg.TextStyle.Font = font.From(sansFont, 8)
	leg.Top, leg.Left = true, true
	leg.Padding = vg.Points(2)

	p.X.Label.Text = "pending messages (log scale)"
	p.X.Scale = plot.LogScale{}
	var xt plot.ConstantTicks
	for _, n := range d.Pending {
		xt = append(xt, plot.Tick{Value: float64(n), Label: human(n)})
	}
	p.X.Tick.Marker = xt
	if len(d.Pending) == 0 {
		return nil, fmt.Errorf("no sizes in the data")
	}
	p.X.Min, p.X.Max = float64(d.Pending[0])/1.4, float64(d.Pending[len(d.Pending)-1])*1.4

	lo, hi, unit := math.Inf(1), math.Inf(-1), ""
	for i, id := range c.series {
		s, ok := findSeries(d, id)
		if !ok {
			continue // not measured on the system that made the data
		}
		unit = s.Unit
		line, band := make(plotter.XYs, len(s.Points)), make(plotter.XYs, 0, 2*len(s.Points))
		for j, pt := range s.Points {
			line[j] = plotter.XY{X: float64(pt.Pending), Y: pt.Median}
			band = append(band, plotter.XY{X: float64(pt.Pending), Y: pt.P10})
			lo, hi = min(lo, pt.P10, pt.Median), max(hi, pt.P90, pt.Median)
		}
		for j := len(s.Points) - 1; j >= 0; j-- {
			band = append(band, plotter.XY{X: float64(s.Points[j].Pending), Y: s.Points[j].P90})
		}
		col := palette[i%len(palette)]
		poly, err := plotter.NewPolygon(band)
		if err != nil {
			return nil, err
		}
		fill := col
		fill.A = 0x28
		poly.Color, poly.LineStyle.Width = fill, 0
		l, pts, err := plotter.NewLinePoints(line)
		if err != nil {
			return nil, err
		}
		l.Color, l.Width = col, vg.Points(1.5)
		if strings.HasPrefix(s.Label, "floor") {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		pts.Color, pts.Shape, pts.Radius = col, draw.CircleGlyph{}, vg.Points(2)
		p.Add(poly, l, pts)
		leg.Add(s.Label, l, pts)
	}
	if unit == "" {
		return nil, fmt.Errorf("none of the chart's series is in the data")
	}
	if c.limit != 0 {
		l, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: c.limit}, {X: p.X.Max, Y: c.limit}})
		if err != nil {
			return nil, err
		}
		l.Color, l.Dashes = color.Gray{Y: 0x60}, []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(l)
		leg.Add(c.limitLabel, l)
		hi = max(hi, c.limit)
	}
	if c.logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.TickerFunc(logTicks)
		// From the power of ten below the lowest figure, so that the
		// bottom of the axis is labelled.
		p.Y.Min, p.Y.Max = math.Pow(10, math.Floor(math.Log10(max(lo, 0.01)))), hi*1.5
		// No y label: on a log axis the plotting library places the
		// label's box at the arithmetic mean of the range (near the top)
		// and pads the plot for it. The tick labels carry the unit.
		p.X.Label.Text = "pending messages (log scale); time per call on a log scale"
	} else {
		p.Y.Min, p.Y.Max = min(0, lo*1.1), hi*1.15
		p.Y.Label.Text = "time per call"
		if unit == "MiB" {
			p.Y.Label.Text = "MiB"
		} else {
			p.Y.Tick.Marker = plot.TickerFunc(func(min, max float64) []plot.Tick {
				ts := plot.DefaultTicks{}.Ticks(min, max)
				for i := range ts {
					if ts[i].Label != "" {
						ts[i].Label = fmtMicros(ts[i].Value)
					}
				}
				return ts
			})
		}
	}
	p.Add(plotter.NewGrid())
	return render(p, &leg, caption(d))
}

func findSeries(d *sweepData, id string) (series, bool) {
	for _, s := range d.Series {
		if s.ID == id {
			return s, true
		}
	}
	return series{}, false
}

// caption says where and how the data was measured.
func caption(d *sweepData) string {
	return fmt.Sprintf("Lines: medians; bands: 10th to 90th percentile. Measured %s on %s; load average %s. %s. "+
		"Made by: %s (wall time %.0f s). Drawn from sweep.json, beside this chart, by: bin/pendingbench -charts",
		d.Date, d.Machine, d.Load, d.Settings, d.Command, d.WallSeconds)
}

// render draws p, then leg below it, then the caption wrapped to the
// chart's width, as SVG.
func render(p *plot.Plot, leg *plot.Legend, captionText string) ([]byte, error) {
	sty := text.Style{Color: color.Gray{Y: 0x30}, Font: font.From(sansFont, captionSize), Handler: plot.DefaultTextHandler}
	margin := vg.Points(8)
	lines := wrap(sty, captionText, chartWidth-2*margin)
	lead := vg.Points(captionSize * captionLead)
	capH := vg.Length(len(lines))*lead + margin
	r := leg.Rectangle(draw.New(vgsvg.New(chartWidth, chartHeight)))
	legH := r.Max.Y - r.Min.Y + margin
	cv := vgsvg.New(chartWidth, chartHeight+legH+capH)
	dc := draw.New(cv)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	p.Draw(draw.Crop(dc, 0, 0, legH+capH, 0))
	leg.Draw(draw.Crop(dc, 4*margin, 0, capH, -chartHeight))
	for i, l := range lines {
		dc.FillText(sty, vg.Point{X: margin, Y: capH - margin/2 - vg.Length(i+1)*lead}, l)
	}
	var buf bytes.Buffer
	if _, err := cv.WriteTo(&buf); err != nil {
		return nil, err
	}
	// The fonts are not embedded: name metric-compatible fallbacks for
	// viewers without Liberation Sans.
	return bytes.ReplaceAll(buf.Bytes(), []byte("font-family:Liberation Sans;"), []byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif;")), nil
}

// wrap breaks s at spaces into lines no wider than width in style sty.
func wrap(sty text.Style, s string, width vg.Length) []string {
	var lines []string
	cur := ""
	for _, w := range strings.Fields(s) {
		next := w
		if cur != "" {
			next = cur + " " + w
		}
		if cur != "" && sty.Width(next) > width {
			lines = append(lines, cur)
			next = w
		}
		cur = next
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return lines
}

// logTicks are the ticks of a log-scale time axis in microseconds:
// labelled at each power of ten (and at 2 and 5 times it on a short
// axis), unlabelled between.
func logTicks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	few := hi/lo <= 1e3 // up to three decades: 2 and 5 labelled too
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		base := math.Pow(10, e)
		for m := 1; m < 10; m++ {
			v := base * float64(m)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || (few && (m == 2 || m == 5)) {
				t.Label = fmtMicros(v)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// fmtMicros labels a time given in microseconds.
func fmtMicros(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%g s", us/1e6)
	case us >= 1e3:
		return fmt.Sprintf("%g ms", us/1e3)
	}
	return fmt.Sprintf("%g µs", us)
}
