package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSaveWritesThePlotsAndTheOverviewAtTheTop(t *testing.T) {
	root := t.TempDir()
	cfg := QuickConfig()
	cfg.RepoRoot, cfg.ArtifactDir, cfg.Out = root, filepath.Join(root, "docs", "benchmarks"), filepath.Join(root, "docs", "benchmarks.md")
	if err := Save(cfg, loadFixture(t)); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		file  string
		paths []string
	}{
		// The fixture's sweep has no relay-before; naive-lean failed at 1,000 objects and
		// still has its point at 5,000.
		{ratePlotFile(ModeQuick), []string{Relay, NaiveLean, Naive, MachineLimit}},
		{rssPlotFile(ModeQuick), []string{"relay RSS", "relay peak RSS (sweep)", "naive RSS", "naive peak RSS (sweep)"}},
	} {
		b, err := os.ReadFile(filepath.Join(cfg.ArtifactDir, tt.file))
		if err != nil {
			t.Fatalf("plot %s: %v", tt.file, err)
		}
		var got []string
		for _, el := range parseSVG(t, b) {
			if el.Name == "path" && el.Attrs["class"] == "series" {
				got = append(got, el.Attrs["data-name"])
			}
		}
		if strings.Join(got, "|") != strings.Join(tt.paths, "|") {
			t.Errorf("%s: got series %q, want %q", tt.file, got, tt.paths)
		}
	}
	saved, err := os.ReadFile(cfg.Out)
	if err != nil {
		t.Fatal(err)
	}
	top, _, ok := strings.Cut(string(saved), "## How to reproduce")
	if !ok {
		t.Fatal("report has no How to reproduce section")
	}
	for _, want := range []string{
		markOverviewBegin,
		"## At a glance",
		"| initial sync | machine-limit | 8081/s | 5434/s | 1.49 | ≥ 0.8: met |",
		"| initial sync | naive-lean | 8081/s | 3448/s | 2.34 | ≥ 2: met |",
		"| initial sync | bare-list-json | 8081/s | 7064/s | 1.14 | – |",
		"| catch-up (watch cache) | raw-watch | 4564/s | 5457/s | 0.84 | ≥ 0.8: met |",
		"![Initial-sync rate against object count](benchmarks/quick-initial-sync-rate.svg)",
		"![RSS against watched objects](benchmarks/quick-rss.svg)",
		"- CPU: the relay spends 1.09 CPU seconds per 10,000 objects",
		"- Memory: ",
		markOverviewEnd,
	} {
		if !strings.Contains(top, want) {
			t.Errorf("top of the report: got no %q in:\n%s", want, top)
		}
	}
}

func TestOverviewPrefersTheFullRunOnceItHasTheReferences(t *testing.T) {
	root := t.TempDir()
	cfg := QuickConfig()
	cfg.RepoRoot, cfg.ArtifactDir, cfg.Out = root, filepath.Join(root, "docs", "benchmarks"), filepath.Join(root, "docs", "benchmarks.md")
	full := loadFixture(t)
	full.Mode = ModeFull
	fullCfg := cfg
	fullCfg.Mode = ModeFull
	if err := Save(fullCfg, full); err != nil {
		t.Fatal(err)
	}
	if err := Save(cfg, loadFixture(t)); err != nil {
		t.Fatal(err)
	}
	saved, err := os.ReadFile(cfg.Out)
	if err != nil {
		t.Fatal(err)
	}
	top := between(string(saved), markOverviewBegin, markOverviewEnd)
	if !strings.Contains(top, "From the full run") || !strings.Contains(top, "benchmarks/full-initial-sync-rate.svg") {
		t.Errorf("overview after a quick run beside a full one: got\n%s\nwant the full run's", top)
	}
}
