package bench

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
)

// svgElement is an element of a parsed SVG document with the attributes the tests read.
type svgElement struct {
	Name  string
	Attrs map[string]string
	Text  string
}

// parseSVG parses doc as XML and returns its elements in document order; it fails the test
// when doc is not well-formed or its root is not an svg element.
func parseSVG(t *testing.T, doc []byte) []svgElement {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	var out []svgElement
	var open []int
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, doc)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			el := svgElement{Name: tk.Name.Local, Attrs: map[string]string{}}
			for _, a := range tk.Attr {
				el.Attrs[a.Name.Local] = a.Value
			}
			out = append(out, el)
			open = append(open, len(out)-1)
		case xml.EndElement:
			open = open[:len(open)-1]
		case xml.CharData:
			if len(open) > 0 {
				out[open[len(open)-1]].Text += string(tk)
			}
		}
	}
	if len(out) == 0 || out[0].Name != "svg" {
		t.Fatalf("root element: got %v, want svg", out)
	}
	return out
}

func TestPlotWritesOnePathPerSeriesWithAxesAndLegend(t *testing.T) {
	tests := []struct {
		name      string
		plot      Plot
		wantPaths []string
	}{
		{
			name: "two series",
			plot: Plot{Title: "Initial sync", XLabel: "objects", YLabel: "events/s", Series: []Series{
				{Name: "relay", Points: []Point{{1000, 4000}, {2500, 5200}, {5000, 6100}}},
				{Name: "machine limit", Dashed: true, Points: []Point{{1000, 9000}, {2500, 11000}, {5000, 12500}}},
			}},
			wantPaths: []string{"relay", "machine limit"},
		},
		{
			name: "a series without points is left out",
			plot: Plot{Title: "RSS", XLabel: "objects", YLabel: "MiB", Series: []Series{
				{Name: "relay", Points: []Point{{2000, 40}, {10000, 60}}},
				{Name: "relay-before"},
				{Name: "naive <informer>", Points: []Point{{2000, 80}}},
			}},
			wantPaths: []string{"relay", "naive <informer>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := tt.plot.WriteSVG(&buf); err != nil {
				t.Fatalf("WriteSVG: %v", err)
			}
			els := parseSVG(t, buf.Bytes())
			var paths, legend, labels []string
			axes := map[string]bool{}
			for _, el := range els {
				switch {
				case el.Name == "path" && el.Attrs["class"] == "series":
					paths = append(paths, el.Attrs["data-name"])
					if d := el.Attrs["d"]; !strings.HasPrefix(d, "M") {
						t.Errorf("series %q: path data %q does not start with a move", el.Attrs["data-name"], d)
					}
				case el.Name == "text" && el.Attrs["class"] == "legend":
					legend = append(legend, el.Text)
				case el.Name == "text" && strings.HasPrefix(el.Attrs["class"], "label"):
					labels = append(labels, el.Text)
				case el.Name == "line" && strings.HasPrefix(el.Attrs["class"], "axis"):
					axes[el.Attrs["class"]] = true
				}
			}
			if strings.Join(paths, "|") != strings.Join(tt.wantPaths, "|") {
				t.Errorf("series paths: got %q, want %q", paths, tt.wantPaths)
			}
			if strings.Join(legend, "|") != strings.Join(tt.wantPaths, "|") {
				t.Errorf("legend: got %q, want %q", legend, tt.wantPaths)
			}
			if !axes["axis x"] || !axes["axis y"] {
				t.Errorf("axes: got %v, want both axis x and axis y", axes)
			}
			if want := []string{tt.plot.XLabel, tt.plot.YLabel}; strings.Join(labels, "|") != strings.Join(want, "|") {
				t.Errorf("axis labels: got %q, want %q", labels, want)
			}
		})
	}
}

func TestPlotPointsStayInsideTheFrame(t *testing.T) {
	p := Plot{Title: "t", XLabel: "x", YLabel: "y", Series: []Series{{Name: "s", Points: []Point{{0, 0}, {3, 7.5}, {10, 101}}}}}
	var buf bytes.Buffer
	if err := p.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	circles := 0
	for _, el := range parseSVG(t, buf.Bytes()) {
		if el.Name != "circle" {
			continue
		}
		circles++
		x, y := attrFloat(t, el, "cx"), attrFloat(t, el, "cy")
		if x < plotLeft || x > plotWidth-plotRight || y < plotTop || y > plotHeight-plotBottom {
			t.Errorf("point at (%g, %g) outside the frame", x, y)
		}
	}
	if circles != 3 {
		t.Errorf("markers: got %d, want 3", circles)
	}
}

func TestPlotRejectsNoPointsAndNaN(t *testing.T) {
	for _, p := range []Plot{
		{Title: "empty", Series: []Series{{Name: "s"}}},
		{Title: "nan", Series: []Series{{Name: "s", Points: []Point{{1, math.NaN()}}}}},
	} {
		if err := p.WriteSVG(io.Discard); err == nil {
			t.Errorf("plot %q: got no error, want one", p.Title)
		}
	}
}

func TestNiceTicksCoverTheTopInRoundSteps(t *testing.T) {
	tests := []struct {
		top  float64
		want string
	}{
		{top: 5000, want: "0 1k 2k 3k 4k 5k"},
		{top: 12345, want: "0 5k 10k 15k"},
		{top: 0.7, want: "0 0.2 0.4 0.6 0.8"},
		{top: 0, want: "0 1"},
	}
	for _, tt := range tests {
		var got []string
		for _, v := range niceTicks(tt.top) {
			got = append(got, tickLabel(v))
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("niceTicks(%g): got %q, want %q", tt.top, strings.Join(got, " "), tt.want)
		}
	}
}

func attrFloat(t *testing.T, el svgElement, name string) float64 {
	t.Helper()
	var v float64
	if _, err := fmt.Sscan(el.Attrs[name], &v); err != nil {
		t.Fatalf("%s %s=%q: %v", el.Name, name, el.Attrs[name], err)
	}
	return v
}
