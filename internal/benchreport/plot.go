package benchreport

import (
	"cmp"
	"fmt"
	"io"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// WriteSVG plots recall against queries per second, end to end, one panel
// per concurrency measured, one line per system and index through its
// Pareto frontier.
func (r *Report) WriteSVG(w io.Writer) error {
	var concurrency []int
	for _, p := range r.Points {
		if p.Mode == EndToEnd && !slices.Contains(concurrency, p.Concurrency) {
			concurrency = append(concurrency, p.Concurrency)
		}
	}
	if len(concurrency) == 0 {
		return fmt.Errorf("benchreport: no end-to-end points to plot")
	}
	slices.Sort(concurrency)
	var series []string // system and index, in the order measured
	for _, p := range r.Points {
		if s := p.System + " " + p.Index; !slices.Contains(series, s) {
			series = append(series, s)
		}
	}
	panels := make([]*plot.Plot, len(concurrency))
	for i, c := range concurrency {
		p := plot.New()
		clients := "1 client"
		if c > 1 {
			clients = fmt.Sprintf("%d clients", c)
		}
		p.Title.Text = fmt.Sprintf("%s, end to end, %s", r.Header.Dataset.Name, clients)
		p.X.Label.Text = fmt.Sprintf("recall@%d", r.Header.Dataset.K)
		p.Y.Label.Text = "queries per second (log)"
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = false, true
		for si, s := range series {
			xys := frontier(r.Points, func(p Point) bool {
				return p.Mode == EndToEnd && p.Concurrency == c && p.System+" "+p.Index == s
			})
			if len(xys) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(xys)
			if err != nil {
				return fmt.Errorf("benchreport: %s: %w", s, err)
			}
			line.Color, line.Dashes = plotutil.Color(si), plotutil.Dashes(si)
			line.Width = vg.Points(1.5)
			points.Color, points.Shape = plotutil.Color(si), plotutil.Shape(si)
			p.Add(line, points)
			p.Legend.Add(s, line, points)
		}
		panels[i] = p
	}
	width, height := vg.Length(len(panels))*16*vg.Centimeter, 12*vg.Centimeter
	canvas := vgsvg.New(width, height)
	tiles := draw.Tiles{Rows: 1, Cols: len(panels), PadX: vg.Centimeter, PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 3}
	canvases := plot.Align([][]*plot.Plot{panels}, tiles, draw.New(canvas))
	for i, p := range panels {
		p.Draw(canvases[0][i])
	}
	_, err := canvas.WriteTo(w)
	return err
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
