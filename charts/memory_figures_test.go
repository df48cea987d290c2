package charts_test

import (
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestMemoryFiguresMatchTheBenchmarks fails when the RSS figures quoted in values.yaml (the
// resources comment) drift from the relay's RSS in the full run of docs/benchmarks.md.
func TestMemoryFiguresMatchTheBenchmarks(t *testing.T) {
	bench := string(mustRead(t, filepath.Join("..", "docs", "benchmarks.md")))
	// The full run's table (the quick run's reduced sizes are not comparable).
	_, full, ok := strings.Cut(bench, "\n## Full run")
	if !ok {
		t.Fatal(`docs/benchmarks.md has no "## Full run" section`)
	}
	if end := strings.Index(full, "\n## "); end >= 0 {
		full = full[:end]
	}
	measured := map[string]float64{} // objects -> RSS in MiB
	for _, m := range regexp.MustCompile(`(?m)^\| relay \| ([0-9,]+) \| ([0-9.]+) MiB \|`).FindAllStringSubmatch(full, -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatal(err)
		}
		measured[m[1]] = v
	}
	values := string(mustRead(t, filepath.Join(chartDir, "values.yaml")))
	// The comment wraps anywhere: match across "# " line breaks.
	flat := strings.Join(strings.Fields(strings.ReplaceAll(values, "\n#", " ")), " ")
	m := regexp.MustCompile(`RSS was ([0-9.]+) MiB at ([0-9,]+) objects and ([0-9.]+) MiB at ([0-9,]+)`).FindStringSubmatch(flat)
	if m == nil {
		t.Fatal(`values.yaml no longer says "RSS was N MiB at N objects and N MiB at N" in the resources comment`)
	}
	for _, q := range [][2]string{{m[2], m[1]}, {m[4], m[3]}} {
		objects, quoted := q[0], q[1]
		got, ok := measured[objects]
		if !ok {
			t.Errorf("values.yaml quotes RSS at %s objects; docs/benchmarks.md measured only %v", objects, measured)
			continue
		}
		if want := strconv.Itoa(int(math.Round(got))); quoted != want {
			t.Errorf("values.yaml says %s MiB at %s objects, docs/benchmarks.md measured %.1f MiB: write %s", quoted, objects, got, want)
		}
	}
}
