package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The fixture is a quick run's results, edited so that every branch of the report shows:
// failed rows in each table, a relisted relay, a republishing naive relay, a forced GC, a
// failed budget run, micro-benchmarks with their own units, notes over two lines.
// results.md is its section as the hand-written formatting of fd4c442 rendered it, before
// the report became a template, with issue 18's references, targets and sweep since (the
// fixture's bare-list, machine-limit, naive-lean and sweep runs are derived from its other
// runs).
const (
	fixtureJSON = "testdata/results.json"
	fixtureMD   = "testdata/results.md"
	fixturePath = "docs/benchmarks/quick.json"
)

func loadFixture(t *testing.T) *Results {
	t.Helper()
	b, err := os.ReadFile(fixtureJSON)
	if err != nil {
		t.Fatal(err)
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

func render(t *testing.T, r *Results) string {
	t.Helper()
	got, err := renderResults(r, fixturePath)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestReportShowsEveryTableAndNumberAsBeforeTheTemplate(t *testing.T) {
	want, err := os.ReadFile(fixtureMD)
	if err != nil {
		t.Fatal(err)
	}
	got := render(t, loadFixture(t))
	if got == string(want) {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := range max(len(gl), len(wl)) {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("line %d:\ngot  %q\nwant %q", i+1, g, w)
		}
	}
}

// withBaseline adds relay-before runs to r: the relay's own, every throughput run taking
// slower times longer, every memory figure grown by extra bytes.
func withBaseline(r *Results, slower float64, extra int64) {
	slow := func(d time.Duration) time.Duration { return time.Duration(float64(d) * slower) }
	for _, t := range append([]*Throughput{r.Sync}, r.Catchup...) {
		var runs []TimedRun
		for _, run := range t.Runs[Relay] {
			run.Took, run.FirstAt, run.CheckpointAt = slow(run.Took), slow(run.FirstAt), slow(run.CheckpointAt)
			runs = append(runs, run)
		}
		t.Runs[RelayBefore] = runs
	}
	for _, st := range r.Steady {
		st.Runs[RelayBefore] = st.Runs[Relay]
	}
	for _, m := range r.Memory.Runs {
		if m.Contender == Relay {
			m.Contender, m.RSS, m.PeakRSS = RelayBefore, m.RSS+extra, m.PeakRSS+extra
			r.Memory.Runs = append(r.Memory.Runs, m)
		}
	}
}

func TestReportShowsTheBaselineBesideTheRelay(t *testing.T) {
	r := loadFixture(t)
	withBaseline(r, 1.25, 8<<20)
	got := render(t, r)
	relayRows, beforeRows := 0, 0
	for _, line := range strings.Split(got, "\n") {
		cells := strings.Split(line, " | ")
		switch {
		case strings.HasPrefix(line, "| relay | 2/2 |"), strings.HasPrefix(line, "| relay (relisted"):
			relayRows++
		case strings.HasPrefix(line, "| relay-before | 2/2 |"), strings.HasPrefix(line, "| relay-before (relisted"):
			beforeRows++
			// Throughput rows: the sixth cell is the relay's rate divided by the row's.
			if len(cells) == 12 && cells[5] != "1.25" {
				t.Errorf("relay ÷ relay-before: got %q, want 1.25 in %s", cells[5], line)
			}
		}
	}
	// Initial sync, one catch-up, two steady rates.
	if relayRows != 4 || beforeRows != 4 {
		t.Errorf("got %d relay and %d relay-before rows, want 4 of each:\n%s", relayRows, beforeRows, got)
	}
	for _, want := range []string{
		"### Before and after: the relay beside relay-before",
		"| initial sync: rate | ",
		"| initial sync: checkpoint at | ",
		"| steady 1000/s: own p99 | 8.47ms | 8.47ms | 1.00 |",
		"| memory at 10,000 objects: RSS | 70.8 MiB | 78.8 MiB | 0.90 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("got no %q in:\n%s", want, got)
		}
	}
	for _, row := range Summarize(r).BeforeAfter {
		want := map[string]string{"initial sync: rate": "1.25", "initial sync: checkpoint at": "0.80"}[row.What]
		if got := fmt.Sprintf("%.2f", row.Ratio); want != "" && got != want {
			t.Errorf("%s: got relay ÷ before %s, want %s", row.What, got, want)
		}
	}
	// A fixed extra cancels in the growth per object: the baseline's equals the relay's.
	_, relayRSS, _ := strings.Cut(got, "| relay RSS | ")
	perObject, _, _ := strings.Cut(relayRSS, " |")
	for _, want := range []string{
		"| relay-before | 2,000 | 67.7 MiB |",
		"| relay-before | 10,000 | 78.8 MiB |",
		"| relay-before RSS | " + perObject + " |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("got no %q in:\n%s", want, got)
		}
	}
}

func TestSaveWritesEveryFigureOfTheReportToTheJSON(t *testing.T) {
	root := t.TempDir()
	cfg := QuickConfig()
	cfg.RepoRoot, cfg.ArtifactDir, cfg.Out = root, filepath.Join(root, "docs", "benchmarks"), filepath.Join(root, "docs", "benchmarks.md")
	r := loadFixture(t)
	if err := Save(cfg, r); err != nil {
		t.Fatal(err)
	}
	saved, err := os.ReadFile(cfg.Out)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(cfg.ArtifactDir, "quick.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Results
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Summary == nil || back.Summary.Sync == nil {
		t.Fatalf("saved JSON: got no summary of the initial sync, want one")
	}
	if want := Summarize(loadFixture(t)); !reflect.DeepEqual(back.Summary, want) {
		t.Errorf("summary after the round trip:\ngot  %+v\nwant %+v", back.Summary, want)
	}
	// The relay's median rate, computed here from its two rounds.
	var relay ThroughputRow
	for _, row := range back.Summary.Sync.Rows {
		if row.Contender == Relay {
			relay = row
		}
	}
	runs := r.Sync.Runs[Relay]
	n := float64(r.Sync.Events)
	wantRate := (n/runs[0].Took.Seconds() + n/runs[1].Took.Seconds()) / 2
	if relay.Rate != wantRate || relay.OK != 2 {
		t.Errorf("relay's initial sync: got %d ok at %v/s, want 2 at %v/s", relay.OK, relay.Rate, wantRate)
	}
	if len(back.Summary.Targets) == 0 || len(back.Summary.Budget) != len(r.Budget.Runs) {
		t.Errorf("got %d targets and %d budget rows, want some and %d", len(back.Summary.Targets), len(back.Summary.Budget), len(r.Budget.Runs))
	}

	// Rendering again from the saved JSON writes the same report.
	if err := os.Remove(cfg.Out); err != nil {
		t.Fatal(err)
	}
	if err := Render(cfg); err != nil {
		t.Fatal(err)
	}
	again, err := os.ReadFile(cfg.Out)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(saved) {
		t.Errorf("report rendered from the saved JSON differs from the one saved with it")
	}
	if want, _ := os.ReadFile(fixtureMD); !strings.Contains(string(saved), string(want)) {
		t.Errorf("saved report: got no section equal to %s", fixtureMD)
	}
}
