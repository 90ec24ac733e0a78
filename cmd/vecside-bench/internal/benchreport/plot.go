package benchreport

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// WriteSVG plots recall against queries per second, end to end, one panel
// per concurrency measured, one line per system, index and way in
// (Point.Series) through its Pareto frontier, the legend below the panels.
func (r *Report) WriteSVG(w io.Writer) error {
	var concurrency []int
	for _, p := range r.Points {
		if p.Mode != SidecarOnly && !slices.Contains(concurrency, p.Concurrency) {
			concurrency = append(concurrency, p.Concurrency)
		}
	}
	if len(concurrency) == 0 {
		return fmt.Errorf("benchreport: no end-to-end points to plot")
	}
	slices.Sort(concurrency)
	var series []string // in the order measured
	for _, p := range r.Points {
		if s := p.Series(); p.Mode != SidecarOnly && !slices.Contains(series, s) {
			series = append(series, s)
		}
	}
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.ThumbnailWidth, legend.Padding = vg.Centimeter, vg.Millimeter
	panels := make([]*plot.Plot, len(concurrency))
	for i, c := range concurrency {
		p := plot.New()
		clients := "1 client"
		if c > 1 {
			clients = fmt.Sprintf("%d clients", c)
		}
		p.Title.Text = fmt.Sprintf("%s, end to end, %s", r.Header.Dataset.Name, clients)
		p.X.Label.Text = fmt.Sprintf("recall@%d", r.Header.Dataset.K)
		p.Y.Label.Text = "queries per second (log scale)"
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.TickerFunc(logTicks)
		p.Add(plotter.NewGrid())
		var all plotter.XYs
		for si, s := range series {
			xys := frontier(r.Points, func(p Point) bool {
				return p.Mode != SidecarOnly && p.Concurrency == c && p.Series() == s
			})
			if len(xys) == 0 {
				continue
			}
			all = append(all, xys...)
			line, points, err := plotter.NewLinePoints(xys)
			if err != nil {
				return fmt.Errorf("benchreport: %s: %w", s, err)
			}
			line.Color, line.Dashes, line.Width = plotutil.Color(si), plotutil.Dashes(si), vg.Points(1.5)
			points.Color, points.Shape, points.Radius = plotutil.Color(si), plotutil.Shape(si), vg.Points(3.5)
			p.Add(line, points)
			if i == 0 {
				legend.Add(s, line, points)
			}
		}
		pad(p, all)
		panels[i] = p
	}
	// The legend goes below the panels, where it hides no point.
	entry := vg.Length(0.55) * vg.Centimeter
	legendHeight := entry*vg.Length(len(series)) + 5*vg.Millimeter
	width, height := vg.Length(len(panels))*15*vg.Centimeter, 11*vg.Centimeter+legendHeight
	canvas := vgsvg.New(width, height)
	dc := draw.New(canvas)
	top := draw.Crop(dc, 0, 0, legendHeight, 0)
	tiles := draw.Tiles{Rows: 1, Cols: len(panels), PadX: vg.Centimeter, PadTop: 3 * vg.Millimeter, PadLeft: 3 * vg.Millimeter, PadRight: 5 * vg.Millimeter}
	canvases := plot.Align([][]*plot.Plot{panels}, tiles, top)
	for i, p := range panels {
		p.Draw(canvases[0][i])
	}
	bottom := draw.Crop(dc, 2*vg.Centimeter, 0, 0, -(height - legendHeight + 3*vg.Millimeter))
	legend.Draw(bottom)
	_, err := canvas.WriteTo(w)
	return err
}

// pad widens the axes a little beyond the points, so that no glyph is cut
// at the edge.
func pad(p *plot.Plot, xys plotter.XYs) {
	if len(xys) == 0 {
		return
	}
	xmin, xmax, ymin, ymax := plotter.XYRange(xys)
	dx := max((xmax-xmin)*0.05, 0.002)
	p.X.Min, p.X.Max = xmin-dx, xmax+dx
	p.Y.Min, p.Y.Max = ymin/1.15, ymax*1.15
}

// logTicks labels 1, 2 and 5 times the powers of ten within [min, max],
// and every integer multiple where that gives fewer than three labels (a
// range within one decade).
func logTicks(min, max float64) []plot.Tick {
	for _, steps := range [][]float64{{1, 2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}} {
		var ticks []plot.Tick
		for decade := math.Pow(10, math.Floor(math.Log10(min))); decade <= max; decade *= 10 {
			for _, m := range steps {
				if v := m * decade; v >= min && v <= max {
					ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
				}
			}
		}
		if len(ticks) >= 3 {
			return ticks
		}
	}
	// Within a factor of two or so: the ends will do.
	return []plot.Tick{{Value: min, Label: fmt.Sprintf("%.0f", min)}, {Value: max, Label: fmt.Sprintf("%.0f", max)}}
}

// WriteSVGFile writes the plot to path.
func (r *Report) WriteSVGFile(path string) error {
	return writeFile(path, r.WriteSVG)
}

// frontier returns the points that pass keep and that no other such point
// beats on both recall and QPS, by increasing recall.
func frontier(points []Point, keep func(Point) bool) plotter.XYs {
	var all []Point
	for _, p := range points {
		if keep(p) && p.QPS > 0 {
			all = append(all, p)
		}
	}
	// By recall, best first, and within equal recall by QPS, best first:
	// a point belongs when it is faster than every point of higher recall.
	slices.SortFunc(all, func(a, b Point) int {
		return cmp.Or(cmp.Compare(b.Recall, a.Recall), cmp.Compare(b.QPS, a.QPS))
	})
	var out plotter.XYs
	best := 0.0
	for _, p := range all {
		if p.QPS > best {
			out = append(out, plotter.XY{X: p.Recall, Y: p.QPS})
			best = p.QPS
		}
	}
	slices.Reverse(out)
	return out
}
