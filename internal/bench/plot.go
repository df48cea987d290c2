package bench

import (
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Geometry of a plot, in SVG user units (pixels at 100%): wide enough for a Markdown page,
// margins for the tick labels on the left and bottom and the legend on the right.
const (
	plotWidth, plotHeight        = 720, 400
	plotLeft, plotRight          = 70, 190
	plotTop, plotBottom          = 40, 50
	plotTicks                    = 5 // about this many ticks per axis
	plotMarkerRadius             = 3
	plotLegendLine, plotLegendDY = 24, 18
)

// plotColors are the series' colours in order: distinguishable, and readable in grey.
var plotColors = []string{"#1b6ac9", "#d1495b", "#2e933c", "#e09f3e", "#6a4c93", "#444444"}

// Plot is a line plot of a few series over a common numeric x axis; both axes start at 0.
type Plot struct {
	Title, XLabel, YLabel string
	Series                []Series
}

// Series is one named line of a Plot; Dashed draws it dashed (a reference rather than a
// contender).
type Series struct {
	Name   string
	Dashed bool
	Points []Point
}

// Point is one measurement of a Series.
type Point struct{ X, Y float64 }

// hasPoints says some series of p has a point to draw.
func (p Plot) hasPoints() bool {
	for _, s := range p.Series {
		if len(s.Points) > 0 {
			return true
		}
	}
	return false
}

// WriteSVG writes p as a standalone SVG document: a frame with ticks and labels on both axes,
// one <path class="series"> per series with a marker per point, and a legend. Series without
// points are left out; a plot without any point is an error.
func (p Plot) WriteSVG(w io.Writer) error {
	maxX, maxY, points := 0.0, 0.0, 0
	for _, s := range p.Series {
		for _, pt := range s.Points {
			if math.IsNaN(pt.X) || math.IsNaN(pt.Y) || math.IsInf(pt.X, 0) || math.IsInf(pt.Y, 0) {
				return fmt.Errorf("plot %q: series %q has a point that is not a number", p.Title, s.Name)
			}
			maxX, maxY, points = max(maxX, pt.X), max(maxY, pt.Y), points+1
		}
	}
	if points == 0 {
		return fmt.Errorf("plot %q: no points", p.Title)
	}
	xTicks, yTicks := niceTicks(maxX), niceTicks(maxY)
	xMax, yMax := xTicks[len(xTicks)-1], yTicks[len(yTicks)-1]
	innerW, innerH := float64(plotWidth-plotLeft-plotRight), float64(plotHeight-plotTop-plotBottom)
	px := func(x float64) float64 { return plotLeft + x/xMax*innerW }
	py := func(y float64) float64 { return plotTop + innerH - y/yMax*innerH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		plotWidth, plotHeight, plotWidth, plotHeight)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", plotWidth, plotHeight)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="14" font-weight="bold">%s</text>`+"\n", plotLeft, plotTop-16, esc(p.Title))
	// Grid and tick labels.
	for _, t := range yTicks {
		y := py(t)
		fmt.Fprintf(&b, `<line class="grid" x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", plotLeft, y, px(xMax), y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", plotLeft-6, y, tickLabel(t))
	}
	for _, t := range xTicks {
		x := px(t)
		fmt.Fprintf(&b, `<line class="grid" x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x, plotTop, x, py(0))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, py(0)+16, tickLabel(t))
	}
	// Axes and their labels.
	fmt.Fprintf(&b, `<line class="axis x" x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", plotLeft, py(0), px(xMax), py(0))
	fmt.Fprintf(&b, `<line class="axis y" x1="%d" y1="%d" x2="%d" y2="%.1f" stroke="black"/>`+"\n", plotLeft, plotTop, plotLeft, py(0))
	fmt.Fprintf(&b, `<text class="label x" x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px(xMax/2), plotHeight-10, esc(p.XLabel))
	fmt.Fprintf(&b, `<text class="label y" transform="translate(16 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", py(yMax/2), esc(p.YLabel))
	// Series and legend.
	legend := 0
	for i, s := range p.Series {
		if len(s.Points) == 0 {
			continue
		}
		color := plotColors[i%len(plotColors)]
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		var d strings.Builder
		for j, pt := range s.Points {
			cmd := "L"
			if j == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%.1f %.1f ", cmd, px(pt.X), py(pt.Y))
		}
		fmt.Fprintf(&b, `<path class="series" data-name="%s" d="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n",
			esc(s.Name), strings.TrimSpace(d.String()), color, dash)
		for _, pt := range s.Points {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="%d" fill="%s"><title>%s: %s at %s</title></circle>`+"\n",
				px(pt.X), py(pt.Y), plotMarkerRadius, color, esc(s.Name), tickLabel(pt.Y), tickLabel(pt.X))
		}
		ly := plotTop + 8 + legend*plotLegendDY
		lx := plotWidth - plotRight + 16
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", lx, ly, lx+plotLegendLine, ly, color, dash)
		fmt.Fprintf(&b, `<text class="legend" x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", lx+plotLegendLine+6, ly, esc(s.Name))
		legend++
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// niceTicks returns ticks from 0 to at least top at a step of 1, 2 or 5 times a power of
// ten, about plotTicks of them.
func niceTicks(top float64) []float64 {
	if top <= 0 {
		return []float64{0, 1}
	}
	raw := top / plotTicks
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	step := pow * 10
	for _, m := range []float64{1, 2, 5} {
		if m*pow >= raw {
			step = m * pow
			break
		}
	}
	ticks := []float64{0}
	for t := step; ; t += step {
		ticks = append(ticks, t)
		if t >= top*(1-1e-9) {
			return ticks
		}
	}
}

// tickLabel writes a number compactly: 2500 as 2.5k, 40000 as 40k, 0.25 as 0.25.
func tickLabel(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case a >= 1e3:
		return strconv.FormatFloat(math.Round(v/10)/100, 'f', -1, 64) + "k"
	default:
		return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
	}
}

// esc escapes text for an SVG attribute or element.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
